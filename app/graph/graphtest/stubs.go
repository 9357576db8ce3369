package graphtest

import "net/http"

func notYet(c *call) answer {
	return c.errAnswer(http.StatusNotImplemented, "notImplemented", "not implemented in the fake yet")
}

func (s *Server) batch(c *call) answer                                          { return notYet(c) }
func (s *Server) createMessage(c *call, u *user, f string) answer               { return notYet(c) }
func (s *Server) addAttachment(c *call, u *user, id string) answer              { return notYet(c) }
func (s *Server) listAttachments(c *call, u *user, id string) answer            { return notYet(c) }
func (s *Server) createAttachmentSession(c *call, u *user, id string) answer    { return notYet(c) }
func (s *Server) putContent(c *call, d *drive, p *driveItem, rel string) answer { return notYet(c) }
func (s *Server) createDriveSession(c *call, d *drive, p *driveItem, rel string) answer {
	return notYet(c)
}
func (s *Server) serveDriveUpload(r *http.Request, tok string, body []byte, reqID string) answer {
	return notYet(&call{reqID: reqID})
}
func (s *Server) serveAttachmentUpload(r *http.Request, tok string, body []byte, reqID string) answer {
	return notYet(&call{reqID: reqID})
}
