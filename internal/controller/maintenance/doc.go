// Package maintenance is the controller that acts on the maintenance events
// the agents write onto their nodes: per event type it does nothing, cordons,
// or cordons and drains against the event's deadline; it asks the agent to
// approve the event once the node is empty, and it puts the node back into
// service when the event is over, undoing only what it did itself. All its
// state is on the Node, so a restarted or newly elected controller resumes.
package maintenance
