package archive

// SetSegmentSize sets the size past which the batcher starts a new spool
// segment, until restore.
func SetSegmentSize(n int64) (restore func()) {
	old := segmentSize
	segmentSize = n
	return func() { segmentSize = old }
}
