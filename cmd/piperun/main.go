// Command piperun runs machine-learning input pipelines declared in YAML.
package main

import (
	"os"

	"github.com/piperun/piperun/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
