"""``acp-bridge check``: an ACP v1 conformance suite for any agent over stdio.

`runner.run_check(CheckOptions(command=[...]))` plays every scenario of
`acp_bridge.check.scenarios` against fresh processes of the agent and returns
a `Report` (`acp_bridge.check.report` renders it); `acp_bridge.check.cli` is
the command line.  What each check requires, and the spec sentence behind it,
is in `acp_bridge.check.requirements`.
"""
