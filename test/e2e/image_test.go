package e2e

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// upstreamChartCommand is the container command of upstream's Helm chart
// (kubernetes/autoscaler, cluster-autoscaler/charts/cluster-autoscaler,
// templates/deployment.yaml), run from the image's working directory.
const upstreamChartCommand = "./cluster-autoscaler"

// dockerInstruction is one instruction of a Dockerfile, continuation lines
// joined.
type dockerInstruction struct {
	cmd  string // upper case
	args string
}

// parseDockerfile splits a Dockerfile into instructions: comments and blank
// lines dropped, lines ending in a backslash joined with the next.
func parseDockerfile(t *testing.T, file string) []dockerInstruction {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstruction
	var cur strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// TestAutoscalerImageLayout reads build/cluster-autoscaler.Dockerfile (there
// is no Docker daemon here): the final stage is distroless nonroot, the binary
// built from ./cluster-autoscaler lands at /cluster-autoscaler, the working
// directory is /, and both upstream's chart command and ours resolve to the
// binary from there.
func TestAutoscalerImageLayout(t *testing.T) {
	instructions := parseDockerfile(t, filepath.Join(repoRoot, "build", "cluster-autoscaler.Dockerfile"))
	last := -1
	for i, in := range instructions {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("no FROM")
	}
	if got := strings.Fields(instructions[last].args)[0]; got != "gcr.io/distroless/static:nonroot" {
		t.Errorf("final stage FROM %s, want gcr.io/distroless/static:nonroot", got)
	}
	// The build stage's output of `go build -o OUT ./cluster-autoscaler`.
	built := ""
	buildOut := regexp.MustCompile(`go build .*-o (\S+) \./cluster-autoscaler\b`)
	for _, in := range instructions[:last] {
		if m := buildOut.FindStringSubmatch(in.args); in.cmd == "RUN" && m != nil {
			built = m[1]
		}
	}
	if built == "" {
		t.Fatal("no build stage runs go build -o OUT ./cluster-autoscaler")
	}
	var binary, workdir, user string
	var command []string
	for _, in := range instructions[last+1:] {
		switch in.cmd {
		case "COPY":
			fields := strings.Fields(in.args)
			if len(fields) == 3 && strings.HasPrefix(fields[0], "--from=") && fields[1] == built {
				binary = fields[2]
			}
		case "WORKDIR":
			workdir = path.Join(workdir, in.args)
		case "USER":
			user = in.args
		case "CMD", "ENTRYPOINT":
			command = nil
			if err := json.Unmarshal([]byte(in.args), &command); err != nil {
				t.Errorf("%s %s is not in exec form: %v", in.cmd, in.args, err)
			}
		}
	}
	if binary != "/cluster-autoscaler" {
		t.Errorf("the built binary is copied to %q, want /cluster-autoscaler", binary)
	}
	if workdir != "/" {
		t.Errorf("working directory %q, want /", workdir)
	}
	if user != "65532:65532" && user != "nonroot" && user != "" {
		t.Errorf("USER %s is not distroless' nonroot", user)
	}
	if len(command) == 0 || path.Join(workdir, command[0]) != binary {
		t.Errorf("the image's command %q does not run %s", command, binary)
	}
	for _, c := range []string{upstreamChartCommand, chartAutoscalerCommand} {
		if got := path.Join(workdir, c); got != binary {
			t.Errorf("command %s from %s runs %s, not the binary %s", c, workdir, got, binary)
		}
	}
}
