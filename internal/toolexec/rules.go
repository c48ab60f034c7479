package toolexec

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-usdt/usdt/rules"
)

// goCommandDir is where the go command runs. The compiler runs in each
// package's directory, but a relative -rules path, $USDT_RULES and the
// main module's usdt.yml all mean the user's directory: the working
// directory of the go process this wrapper descends from, directly or
// through another toolexec wrapper.
func goCommandDir() string {
	pid := os.Getppid()
	for range 4 {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			break
		}
		if strings.TrimSpace(string(comm)) == "go" {
			if dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil {
				return dir
			}
			break
		}
		if pid = parentOf(pid); pid <= 1 {
			break
		}
	}
	if dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", os.Getppid())); err == nil {
		return dir
	}
	dir, _ := os.Getwd()
	return dir
}

// parentOf reads a process's parent from /proc/PID/stat, whose second
// field (the command name, in parentheses) may itself contain spaces.
func parentOf(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// loadRules finds and loads the build's rules; nil without a rules file.
func loadRules(opt Options) (*rules.Rules, error) {
	path, err := rules.Locate(opt.Rules, goCommandDir())
	if err != nil || path == "" {
		return nil, err
	}
	return rules.Load(path)
}

// rulesIdentity is part of the tool identity: editing the rules must
// invalidate every cached compile and link.
func rulesIdentity(r *rules.Rules) string {
	if r == nil {
		return "none"
	}
	return r.Hash[:16]
}
