// Command fakeagent is a small real build of the agent package for the
// self-update tests: it prints the version linked in with
// -ldflags "-X backstop/agent.Version=…".
package main

import (
	"fmt"

	"backstop/agent"
)

func main() { fmt.Println(agent.Version) }
