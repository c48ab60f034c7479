// Command otherwrap is another -toolexec wrapper, to compose with
// usdt-toolexec: it appends its command line to the file named by
// $USDT_E2E_WRAP_LOG, then runs that command line.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: otherwrap TOOL [ARG...]")
		os.Exit(2)
	}
	log, err := os.OpenFile(os.Getenv("USDT_E2E_WRAP_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "otherwrap:", err)
		os.Exit(1)
	}
	// One write per line: O_APPEND keeps concurrent tools' lines whole.
	if _, err := log.WriteString(strings.Join(os.Args[1:], " ") + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, "otherwrap:", err)
		os.Exit(1)
	}
	log.Close()
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "otherwrap:", err)
		os.Exit(1)
	}
}
