package auth

import "sort"

// Roles of admin API tokens (KiCI admin_tokens.role).
const (
	RoleOwner   = "owner"
	RoleAdmin   = "admin"
	RoleAuditor = "auditor"
)

// Permissions checked by admin routes. The first 23 are KiCI's exact set
// (@kici-dev/orchestrator 0.9.1; see docs/kici-compatibility.md#admin-api).
// The source.*, agent.* and agent_token.*
// permissions are kici's own: KiCI gates generic sources with context.* and
// leaves GitHub sources, fleet listings and several other families ungated
// ; kici gates every route, so those families get explicit names here.
const (
	PermContextCreate       = "context.create"
	PermContextUpdate       = "context.update"
	PermContextDelete       = "context.delete"
	PermContextRead         = "context.read"
	PermSecretRead          = "secret.read"
	PermSecretWrite         = "secret.write"
	PermSecretDelete        = "secret.delete"
	PermSecretReveal        = "secret.reveal"
	PermAuditRead           = "audit.read"
	PermTokenManage         = "token.manage"
	PermKeyRotate           = "key.rotate"
	PermRunRead             = "run.read"
	PermRunCancel           = "run.cancel"
	PermEventLogRead        = "event_log.read"
	PermEventLogReadPayload = "event_log.read_payload"
	PermAccessLogRead       = "access_log.read"
	PermScheduledJobTrigger = "scheduled_job.trigger"
	PermAttestationRetry    = "attestation.retry"
	PermEventDLQRead        = "event_dlq.read"
	PermEventDLQManage      = "event_dlq.manage"
	PermOrchestratorDrain   = "orchestrator.drain"
	PermCITrustRead         = "ci_trust.read"
	PermCITrustAdmin        = "ci_trust.admin"
	PermSourceRead          = "source.read"
	PermSourceCreate        = "source.create"
	PermSourceUpdate        = "source.update"
	PermSourceDelete        = "source.delete"
	PermSourceTrigger       = "source.trigger"
	PermSourceSecretRead    = "source.secret.read"
	PermAgentRead           = "agent.read"
	PermAgentManage         = "agent.manage"
	PermAgentTokenManage    = "agent_token.manage"
	PermSettingsRead        = "settings.read"
	PermSettingsWrite       = "settings.write"
	PermDatabaseAdmin       = "database.admin"
	PermRunRerun            = "run.rerun" // kici's own: KiCI offers reruns only through its platform
	PermSecretList          = "secret.list"
)

// Role sets used by the matrix below.
var (
	allRoles   = []string{RoleOwner, RoleAdmin, RoleAuditor}
	ownerAdmin = []string{RoleOwner, RoleAdmin}
	ownerOnly  = []string{RoleOwner}
)

// rolePermissions is the single role × permission matrix. Rows marked KiCI are
// KiCI's role sets (owner 23, admin 21, auditor 6),
// with one departure: ci_trust.read is held by every role (auditor 7).
// Rows marked kici are additions for families KiCI leaves ungated; their
// role sets mirror the closest KiCI permission (writes like context.create;
// credentials like token.manage). Every read is open to an auditor except
// credential values (source.secret.read, secret.reveal) and token listings
// (token.manage, agent_token.manage).
var rolePermissions = map[string][]string{
	// KiCI
	PermContextCreate:       ownerAdmin,
	PermContextUpdate:       ownerAdmin,
	PermContextDelete:       ownerAdmin,
	PermContextRead:         allRoles,
	PermSecretRead:          ownerAdmin,
	PermSecretWrite:         ownerAdmin,
	PermSecretDelete:        ownerAdmin,
	PermSecretReveal:        ownerAdmin,
	PermAuditRead:           allRoles,
	PermTokenManage:         ownerOnly,
	PermKeyRotate:           ownerOnly,
	PermRunRead:             allRoles,
	PermRunCancel:           ownerAdmin,
	PermEventLogRead:        allRoles,
	PermEventLogReadPayload: ownerAdmin,
	PermAccessLogRead:       allRoles,
	PermScheduledJobTrigger: ownerAdmin,
	PermAttestationRetry:    ownerAdmin,
	PermEventDLQRead:        allRoles,
	PermEventDLQManage:      ownerAdmin,
	PermOrchestratorDrain:   ownerAdmin,
	// kici departure: KiCI gives ci_trust.read to owner and admin only.
	// Reading who waits for an approval and which fork policy is in force
	// is auditing, so every role holds it; deciding stays ci_trust.admin.
	PermCITrustRead:  allRoles,
	PermCITrustAdmin: ownerAdmin,
	// kici (families KiCI leaves ungated or gates by a borrowed name)
	PermSourceRead:       allRoles,   // KiCI: context.read
	PermSourceCreate:     ownerAdmin, // KiCI: context.create
	PermSourceUpdate:     ownerAdmin, // KiCI: context.update
	PermSourceDelete:     ownerAdmin, // KiCI: context.delete
	PermSourceTrigger:    ownerAdmin, // KiCI: context.create (events/emit)
	PermSourceSecretRead: ownerAdmin, // webhook secret: like secret.reveal
	PermAgentRead:        allRoles,   // KiCI: fleet, ungated
	PermAgentManage:      ownerAdmin, // KiCI: fleet, ungated
	PermAgentTokenManage: ownerOnly,  // KiCI: token.manage
	// Settings, drain state and signing-key metadata carry no credential;
	// an auditor reads them (KiCI gates cluster settings with secret.read).
	PermSettingsRead:  allRoles,
	PermSettingsWrite: ownerAdmin, // KiCI: secret.write
	PermDatabaseAdmin: ownerOnly,  // KiCI: db migrate, ungated
	PermRunRerun:      ownerAdmin, // KiCI: platform-only rerun; like run.cancel
	// Secret scope and key NAMES (never values): KiCI lists them under
	// secret.read, which would also hide them from an auditor checking
	// what exists.
	PermSecretList: allRoles,
}

// permsByRole is rolePermissions inverted, built once.
var permsByRole = func() map[string]map[string]bool {
	m := map[string]map[string]bool{}
	for perm, roles := range rolePermissions {
		for _, r := range roles {
			if m[r] == nil {
				m[r] = map[string]bool{}
			}
			m[r][perm] = true
		}
	}
	return m
}()

// HasPermission reports whether role holds perm. Unknown roles and unknown
// permissions hold nothing.
func HasPermission(role, perm string) bool { return permsByRole[role][perm] }

// IsRole reports whether role is one of owner, admin, auditor.
func IsRole(role string) bool {
	return role == RoleOwner || role == RoleAdmin || role == RoleAuditor
}

// IsPermission reports whether perm is a permission of the matrix.
func IsPermission(perm string) bool { _, ok := rolePermissions[perm]; return ok }

// Permissions returns every permission name, sorted.
func Permissions() []string {
	out := make([]string, 0, len(rolePermissions))
	for p := range rolePermissions {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
