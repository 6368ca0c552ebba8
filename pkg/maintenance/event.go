// Package maintenance holds the one shape every cloud's maintenance notice
// takes inside sluice, so policy and controllers never see cloud JSON. Each
// source (azure/, and later aws/ and gcp/) is a client plus a test server
// that behaves as the vendor documents, and maps its payload onto Event.
package maintenance

import "time"

// Source is where an event came from.
type Source string

// Sources.
const (
	SourceAzure  Source = "azure"
	SourceAWS    Source = "aws"
	SourceGCP    Source = "gcp"
	SourceManual Source = "manual"
)

// Type is what will happen to the machine (Azure's names, plus AWS's
// rebalance recommendation and GCP's live migration).
type Type string

// Types.
const (
	TypeFreeze      Type = "Freeze"
	TypeReboot      Type = "Reboot"
	TypeRedeploy    Type = "Redeploy"
	TypePreempt     Type = "Preempt"
	TypeTerminate   Type = "Terminate"
	TypeRebalance   Type = "Rebalance"
	TypeMaintenance Type = "Maintenance"
)

// NodeGoesAway reports whether an event of this type takes the machine away
// (a spot preemption, a termination or retirement; some come back, as an AWS
// stopped instance does, but not with their pods), rather than pausing it or
// moving it with its disks and pods in place.
func (t Type) NodeGoesAway() bool { return t == TypePreempt || t == TypeTerminate }

// Status is where the event is in its life.
type Status string

// Statuses.
const (
	StatusScheduled Status = "Scheduled"
	StatusStarted   Status = "Started"
	StatusCompleted Status = "Completed"
	StatusCanceled  Status = "Canceled"
)

// Initiator is who asked for an event: the platform, or the machine's owner
// (Azure's EventSource).
type Initiator string

// Initiators.
const (
	InitiatorPlatform Initiator = "Platform"
	InitiatorUser     Initiator = "User"
)

// Event is one maintenance notice for one machine.
type Event struct {
	ID     string `json:"id"`
	Source Source `json:"source"`
	Type   Type   `json:"type"`
	Status Status `json:"status"`
	// NotBefore is the earliest the event may start; zero once started or
	// when the source does not say.
	NotBefore time.Time `json:"notBefore,omitzero"`
	// Deadline is when the machine is gone or frozen at the latest.
	Deadline time.Time `json:"deadline,omitzero"`
	// Duration is how long the impact lasts; nil when the source does not
	// say (Azure's DurationInSeconds -1), and zero when it says the impact
	// takes no time.
	Duration *time.Duration `json:"duration,omitempty"`
	// Initiator is who asked for the event; empty when the source does not
	// say, which is treated as the platform.
	Initiator   Initiator `json:"initiator,omitempty"`
	Description string    `json:"description,omitempty"`
	Resources   []string  `json:"resources,omitempty"`
}

// UserInitiated reports whether the machine's owner asked for the event (a
// restart or redeploy from the portal, the API, or a tool acting for them).
func (e Event) UserInitiated() bool { return e.Initiator == InitiatorUser }

// DurationOf is d as an Event's Duration.
func DurationOf(d time.Duration) *time.Duration { return &d }
