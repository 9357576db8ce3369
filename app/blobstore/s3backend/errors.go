package s3backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"backstop/app/blobstore"
)

// wrap turns an SDK error into the blobstore vocabulary with a sentence an
// MSP engineer can act on:
//
//   - the caller's context ended: the context's error (not a target fault);
//   - 404 NoSuchKey / NotFound: ErrNotFound;
//   - 403 and refused credentials, or a missing bucket: ErrDenied;
//   - 507, InsufficientStorage, quota codes: ErrFull;
//   - no connection, timeouts, DNS, 5xx after the retries: ErrUnreachable.
//
// Other errors are returned with the target and object named, unwrapped
// into no sentinel. The SDK's messages never hold the secret key.
func (b *Backend) wrap(ctx context.Context, op, name string, err error) error {
	where := fmt.Sprintf("%s %s on %s", op, name, b)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", where, ctxErr)
	}
	code, status := errorCode(err)
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("%s: bucket %q does not exist (NoSuchBucket): %w", where, b.bucket, blobstore.ErrDenied)
	case code == "NoSuchKey" || code == "NotFound" || (code == "" && status == http.StatusNotFound):
		return fmt.Errorf("%s: %w", where, blobstore.ErrNotFound)
	// Before the 403s: some providers answer a quota with 403.
	case status == http.StatusInsufficientStorage || code == "InsufficientStorage" || code == "QuotaExceeded" ||
		code == "XMinioStorageFull" || code == "StorageFull":
		return fmt.Errorf("%s: the provider reports no space or quota left (%s): %w", where, codeOr(code, status), blobstore.ErrFull)
	case code == "InvalidAccessKeyId" || code == "XAdminUserNotFound": // the latter: versitygw
		return fmt.Errorf("%s: the access key was refused: the server does not know this access key id (%s): %w", where, codeOr(code, status), blobstore.ErrDenied)
	case code == "SignatureDoesNotMatch":
		return fmt.Errorf("%s: the access key was refused: the secret access key does not match the access key id (SignatureDoesNotMatch): %w", where, blobstore.ErrDenied)
	case code == "AccessDenied" || code == "AllAccessDisabled" || code == "AccountProblem" || status == http.StatusForbidden:
		return fmt.Errorf("%s: the access key was refused or lacks permission on bucket %q (%s): %w", where, b.bucket, codeOr(code, status), blobstore.ErrDenied)
	case status == http.StatusUnauthorized:
		return fmt.Errorf("%s: the server asked for other credentials (%s): %w", where, codeOr(code, status), blobstore.ErrDenied)
	case status >= 500:
		return fmt.Errorf("%s: the server kept failing after %d attempts (%s): %w", where, maxAttempts, codeOr(code, status), blobstore.ErrUnreachable)
	case status == 0 && isTransport(err):
		return fmt.Errorf("%s: could not reach the server after %d attempts (%v): %w", where, maxAttempts, transportCause(err), blobstore.ErrUnreachable)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// errorCode returns the S3 error code (empty when the answer had no body,
// as with HEAD) and the HTTP status (0 when no answer came).
func errorCode(err error) (code string, status int) {
	var api smithy.APIError
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) {
		status = resp.HTTPStatusCode()
	}
	return code, status
}

func codeOr(code string, status int) string {
	if code != "" {
		return fmt.Sprintf("%s, HTTP %d", code, status)
	}
	return fmt.Sprintf("HTTP %d", status)
}

// isTransport reports a failure to get any answer: refused or reset
// connections, DNS, dial and header timeouts.
func isTransport(err error) bool {
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		return true
	}
	var timeout interface{ Timeout() bool }
	return errors.As(err, &timeout) && timeout.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// transportCause is the most telling part of a send failure: the network
// error (e.g. "dial tcp 127.0.0.1:9: connect: connection refused") where
// there is one, without the SDK's layers.
func transportCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns
	}
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) && send.Err != nil {
		return send.Err
	}
	return err
}

func isNotFound(err error) bool { return errors.Is(err, blobstore.ErrNotFound) }
