// Package leader holds the bodies of the leader's decision loops: the
// adapter between the state's scheduling view and the scheduler, and the
// autoscale round (reconcile the providers' machines with the state,
// plan, record the decision, launch and delete). Each works on a read of
// the state, an Apply seam that commits commands, an injected clock and
// injected providers, so the server (Raft, the wall clock, real clouds)
// and the simulator (package sim: a state applied in process, a virtual
// clock, the simulated cloud) run the same code.
package leader
