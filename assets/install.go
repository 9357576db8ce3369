package assets

import _ "embed"

// AgentInstallScript is /install/agent.sh: the POSIX sh script that installs
// and enrolls the agent on a Linux or macOS machine. The appliance replaces
// __BACKSTOP_SERVER__ with its own address when serving it.
//
//go:embed install/agent.sh
var AgentInstallScript string
