// Package aws reads an EC2 instance's maintenance notices from the instance
// metadata service (IMDSv2) and maps them onto maintenance.Event: the Spot
// interruption notice, scheduled maintenance events, the Spot rebalance
// recommendation and the Auto Scaling target lifecycle state. Server is an
// in-tree emulator that behaves as AWS documents the service, for tests and
// the sandbox.
//
// What AWS documents, and this package follows (Amazon EC2 User Guide: "Use
// IMDSv2", "Retrieve instance metadata", "Instance metadata categories",
// "Spot Instance interruption notices", "EC2 instance rebalance
// recommendations", "Scheduled events for your instances"; Amazon EC2 Auto
// Scaling User Guide: "Retrieve the target lifecycle state through instance
// metadata"):
//
//   - A session token comes from PUT /latest/api/token with a TTL header of
//     1 to 21600 seconds; a PUT that is not valid gets "400 - Missing or
//     Invalid Parameters". PUTs carrying X-Forwarded-For are rejected, and so
//     are PUTs to a version-specific token path (403 - Forbidden). A GET
//     with a missing, invalid or expired token gets "401 - Unauthorized"
//     when tokens are required; the advice is to get a new token. Only GET
//     and HEAD read metadata; every answer is text/plain; a resource that is
//     not there is "404 - Not Found".
//   - spot/instance-action is {"action","time"}: action is hibernate, stop or
//     terminate, time the approximate UTC time the action happens. It is
//     present only once the instance is marked. The notice normally comes two
//     minutes ahead, but not for hibernation, which begins at once.
//   - events/maintenance/scheduled lists the active events
//     ({NotBefore, Code, Description, EventId, NotAfter, State}, times as
//     "21 Jan 2019 09:00:43 GMT"). Canceled and completed events move to
//     events/maintenance/history with State canceled or completed and the
//     Description prefixed "[Canceled] " or "[Completed] ". NotAfter is
//     optional: instance-stop events often carry none.
//   - events/recommendations/rebalance is {"noticeTime"}, the time the signal
//     was emitted; 404 until then.
//   - autoscaling/target-lifecycle-state is plain text: InService, Terminated,
//     Detached, Standby, or with a warm pool Warmed:Hibernated,
//     Warmed:Running, Warmed:Stopped, Warmed:Terminated.
//
// Where this differs from sluice's first notes:
//
//   - A 404 on the target lifecycle state does not prove the instance is
//     outside an Auto Scaling group: AWS answers 404 until the first
//     transition after 10 March 2022, and after a live migration until the
//     next transition. Either way there is nothing to act on.
//   - Detached is a documented state (no event), and Warmed:Terminated ends
//     the machine as Terminated does, so both map to TypeTerminate.
//   - The scheduled list holds active events only; a canceled event leaves it
//     (and so leaves the Observation, which is how a caller learns it is
//     over) rather than staying with State canceled. Should AWS ever list a
//     canceled or completed event there, it is still mapped to
//     StatusCanceled or StatusCompleted.
//   - AWS does not say what the scheduled list answers when it is empty. The
//     AWS node termination handler, which polls it on every node, treats any
//     non-2xx as an error, so the emulator answers "[]" with 200; the client
//     takes both "[]" and a 404 as "no events".
//   - AWS does not name the status for an X-Forwarded-For PUT, only that it is
//     rejected; the emulator answers 403, the documented "request is not
//     allowed".
//
// AWS has no call to start an event early, so Source does not implement
// maintenance.Approver.
package aws
