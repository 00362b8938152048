// Package view builds the leader's read models from one consistent read
// of the replicated state (state.Reader): the scheduling round's input,
// each user's queue bounded by the fair share the scheduler will use, and
// the autoscaler's demand. The state keeps its tables to itself and knows
// neither the scheduler nor the autoscaler; this package is where the
// state's rows become their inputs, as Nomad's schedulers read a state
// snapshot and Kueue's a cache snapshot.
package view
