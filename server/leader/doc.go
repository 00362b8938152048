// Package leader holds the bodies of the leader's decision loops: the
// scheduler's decision as a Plan command, and the autoscale round
// (reconcile the providers' machines with the state, plan, record the
// decision, launch and delete). Each works on a consistent read of the
// state (the read models of package view), an Apply seam that commits
// commands, an injected clock and injected providers, so the server
// (Raft, the wall clock, real clouds) and the simulator (package sim: a
// state applied in process, a virtual clock, the simulated cloud) run the
// same code.
package leader
