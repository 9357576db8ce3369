package resticcmd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"backstop/app"
)

func TestTailKeepsTheLastEightNonBlankLines(t *testing.T) {
	var b strings.Builder
	for i := range 12 {
		b.WriteString("line " + string(rune('a'+i)) + "\n\n")
	}
	got := Tail([]byte(b.String()))
	if lines := strings.Split(got, "\n"); len(lines) != 8 || lines[0] != "line e" || lines[7] != "line l" {
		t.Fatalf("Tail = %q", got)
	}
}

func TestCommandSkipsFlags(t *testing.T) {
	if c := Command([]string{"--json", "-q", "snapshots", "--latest"}); c != "snapshots" {
		t.Fatalf("Command = %q", c)
	}
}

func TestLimitedBufferDiscardsBeyondMax(t *testing.T) {
	l := &limitedBuffer{max: 5}
	if n, err := l.Write([]byte("abcdefgh")); n != 8 || err != nil || l.String() != "abcde" {
		t.Fatalf("wrote %d %v, kept %q", n, err, l.String())
	}
}

func TestRunWithoutTheBinaryIsAToolFailure(t *testing.T) {
	r := &Repo{Bin: "/nonexistent/restic", Tmp: t.TempDir(), ToolFailure: "verify.tool_failed"}
	_, err := r.Run(context.Background(), "--json", "snapshots")
	var fe *app.FailureError
	if !errors.As(err, &fe) || fe.Code != "verify.tool_failed" || fe.Step != "snapshots" {
		t.Fatalf("Run without restic: %v", err)
	}
}

func TestEnvPointsResticOnlyAtTheRepository(t *testing.T) {
	t.Setenv("RESTIC_REPOSITORY", "/elsewhere")
	t.Setenv("RESTIC_PASSWORD", "leak")
	env := strings.Join((&Repo{Dir: "/repo", PasswordFile: "/pw", Tmp: "/tmp/run"}).Env(), "\n")
	if strings.Contains(env, "/elsewhere") || strings.Contains(env, "leak") || !strings.Contains(env, "RESTIC_REPOSITORY=/repo") ||
		!strings.Contains(env, "TMPDIR=/tmp/run") {
		t.Fatalf("env:\n%s", env)
	}
}
