package e2e

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"backstop/agentapi/wire"
)

// BenchmarkResticVsRestServer is the first performance figure of
// docs/benchmarks.md: the same restic backs up the same corpus of
// incompressible files into a fresh repository, alternately through the
// appliance (/agent/restic/<id>/ of a real `backstop serve`, endpoint
// credentials, append-only, SHA-256 check) and into rest-server (the server
// users would pick instead: --append-only, upload verification on as by
// default, and --no-auth, so that rest-server does the least work per
// request while the appliance checks the endpoint's credentials on every
// one). It reports the median of each and their ratio.
//
//	BACKSTOP_BENCH_REST_SERVER=/path/to/rest-server \
//	go test -run '^$' -bench ResticVsRestServer -benchtime 1x -timeout 60m ./e2e/
//
// BACKSTOP_BENCH_MIB sets the corpus size (default 1024), BACKSTOP_BENCH_ROUNDS
// the backups per server (default 6), BACKSTOP_BENCH_CORPUS_DIR keeps the
// corpus between runs. rest-server is not on the Go module proxy nor in
// Debian; build it from its source (github.com/restic/rest-server).
func BenchmarkResticVsRestServer(b *testing.B) {
	restServer := os.Getenv("BACKSTOP_BENCH_REST_SERVER")
	if restServer == "" {
		b.Skip("set BACKSTOP_BENCH_REST_SERVER to a rest-server binary to compare with")
	}
	restic, err := exec.LookPath("restic")
	if err != nil {
		b.Fatal("restic is not installed: ", err)
	}
	mib, rounds := envInt(b, "BACKSTOP_BENCH_MIB", 1024), envInt(b, "BACKSTOP_BENCH_ROUNDS", 6)
	corpus := os.Getenv("BACKSTOP_BENCH_CORPUS_DIR")
	if corpus == "" {
		corpus = b.TempDir()
	}
	writeCorpus(b, corpus, int64(mib)<<20)

	// The appliance, with one enrolled endpoint.
	a := startAppliance(b)
	admin := func(args ...string) string {
		out, err := exec.Command(binary(b), append([]string{"admin"}, append(args, "--data-dir", a.DataDir)...)...).Output()
		if err != nil {
			b.Fatalf("admin %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	tenant := lastField(admin("create-tenant", "--name", "Bench"))
	token := lastField(admin("create-enrollment-token", "--tenant", tenant, "--profile", "server"))
	var enrolled wire.EnrollResponse
	agentCall(b, a, "", "", "/agent/v1/enroll", wire.EnrollRequest{Token: token, Hostname: "bench", OS: "linux", Arch: "amd64",
		AgentVersion: "1.0.0"}, &enrolled)
	applianceRepo := fmt.Sprintf("rest:%s/agent/restic/%s/", strings.Replace(a.URL, "http://", "http://"+enrolled.EndpointID+":"+enrolled.Secret+"@", 1),
		enrolled.EndpointID)

	rsDir := b.TempDir()
	rsAddr := freeAddr(b)
	rs := exec.Command(restServer, "--path", rsDir, "--listen", rsAddr, "--append-only", "--no-auth")
	rs.Stderr = os.Stderr
	if err := rs.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Process.Kill(); rs.Wait() })
	waitFor(b, "rest-server listening", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", rsAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	restRepo := "rest:http://" + rsAddr + "/"

	// CPU time of each server, from /proc: less noisy than wall time on a
	// shared machine, and what the server takes from restic on two cores.
	var cpuAppliance, cpuRestServer, sysAppliance, sysRestServer time.Duration
	backup := func(repo, storage string, pid int, cpu, sys *time.Duration) float64 {
		run := func(args ...string) {
			cmd := exec.Command(restic, append([]string{"-r", repo, "--no-cache"}, args...)...)
			cmd.Env = append(os.Environ(), "RESTIC_PASSWORD=bench")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("restic %v: %v\n%s", args, err, out)
			}
		}
		run("init")
		start := time.Now()
		user0, sys0 := cpuTime(b, pid)
		run("backup", corpus)
		mbps := float64(mib) / time.Since(start).Seconds()
		user1, sys1 := cpuTime(b, pid)
		*cpu += user1 - user0 + sys1 - sys0
		*sys += sys1 - sys0
		// The next round starts from an empty repository again.
		if err := os.RemoveAll(storage); err != nil {
			b.Fatal(err)
		}
		return mbps
	}
	var viaAppliance, viaRestServer []float64
	viaA := func() {
		viaAppliance = append(viaAppliance, backup(applianceRepo, filepath.Join(a.DataDir, "agent", "restic", enrolled.EndpointID),
			a.pid, &cpuAppliance, &sysAppliance))
	}
	viaR := func() {
		viaRestServer = append(viaRestServer, backup(restRepo, rsDir, rs.Process.Pid, &cpuRestServer, &sysRestServer))
		if err := os.MkdirAll(rsDir, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	// ABBA: each server goes first in every other round, so neither always
	// inherits the other's deletions and writeback.
	for i := range rounds {
		if i%2 == 0 {
			viaA()
			viaR()
		} else {
			viaR()
			viaA()
		}
	}
	ma, mr := median(viaAppliance), median(viaRestServer)
	b.ReportMetric(ma, "appliance-MiB/s")
	b.ReportMetric(mr, "rest-server-MiB/s")
	b.ReportMetric(ma/mr, "ratio")
	gib := float64(mib*rounds) / 1024
	b.ReportMetric(cpuAppliance.Seconds()/gib, "appliance-CPU-s/GiB")
	b.ReportMetric(cpuRestServer.Seconds()/gib, "rest-server-CPU-s/GiB")
	b.Logf("%d MiB, %d alternating rounds: appliance %s MiB/s, rest-server %s MiB/s; median ratio %.3f; "+
		"server CPU per GiB: appliance %.2f s (%.2f s in the kernel), rest-server %.2f s (%.2f s in the kernel)",
		mib, rounds, figures(viaAppliance), figures(viaRestServer), ma/mr, cpuAppliance.Seconds()/gib, sysAppliance.Seconds()/gib,
		cpuRestServer.Seconds()/gib, sysRestServer.Seconds()/gib)
}

// writeCorpus fills dir with total bytes of random data in 32 MiB files,
// unless it already holds that many.
func writeCorpus(b *testing.B, dir string, total int64) {
	var have int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			have += info.Size()
		}
	}
	if have == total {
		return
	}
	buf := make([]byte, 1<<20)
	for i := 0; total > 0; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%04d", i)))
		if err != nil {
			b.Fatal(err)
		}
		n := min(total, 32<<20)
		for left := n; left > 0; left -= int64(len(buf)) {
			_, _ = rand.Read(buf)
			if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		total -= n
	}
}

// cpuTime is the user and the system CPU time the process has used so far
// (/proc/<pid>/stat, fields 14 and 15, in clock ticks of 1/100 s).
func cpuTime(b *testing.B, pid int) (user, sys time.Duration) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; count from after it.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime) * 10 * time.Millisecond, time.Duration(stime) * 10 * time.Millisecond
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func figures(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(parts, ", ")
}
