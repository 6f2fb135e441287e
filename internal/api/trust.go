package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/boundedre"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trustpolicy"
)

// Trust-policy routes (KiCI orchestrator trust-policy admin routes): an
// org's fork policy and its approval directory. Reads work in every mode;
// writes are refused (409) when the KiCI Platform owns the policy
// (platform, hybrid, observed). Every write commits with its access-log row
// in one transaction, so a loosened policy never lands unaudited.

// trustPlatformMsg is the 409 body of the trust-policy and directory writes
// in a Platform-connected mode.
func trustPlatformMsg(mode config.Mode) string {
	return fmt.Sprintf("The trust policy and approval directory are managed by the KiCI Platform in %s mode: change them in the Platform dashboard", mode)
}

// Approval-window bounds: at most one (leap) year. The hours bound is
// checked before any multiplication, so a huge approvalExpiryHours cannot
// overflow into a negative or small window.
const (
	maxApprovalExpiryHours   = 366 * 24
	maxApprovalExpirySeconds = maxApprovalExpiryHours * 3600
)

func (s *server) policyView(p store.TrustPolicy, stored bool) apitypes.TrustPolicyView {
	v := apitypes.TrustPolicyView{CustomerID: p.OrgID, ForkPolicy: p.ForkPolicy, ApprovalExpirySeconds: p.ApprovalExpirySeconds,
		ApprovalExpiryHours: trustpolicy.ExpiryHours(p.ApprovalExpirySeconds), EffectiveDefault: !stored,
		PlatformManaged: platformConnected(s.d.Mode)}
	if stored {
		v.Source = strPtr(p.Source)
		at := p.UpdatedAt
		v.UpdatedAt = &at
	}
	return v
}

// getTrustPolicy is GET /trust-policy?customerId=: {policy}.
func (s *server) getTrustPolicy(w http.ResponseWriter, r *http.Request) {
	org, ok := customerParam(w, r)
	if !ok {
		return
	}
	p, stored, err := trustpolicy.Effective(r.Context(), s.d.Store, org)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.TrustPolicyEnvelope{Policy: s.policyView(p, stored)})
}

// patchTrustPolicy is PATCH /trust-policy {customerId, forkPolicy?,
// approvalExpiryHours?, approvalExpirySeconds?}: {policy}. When both expiry
// fields are given the seconds win. The read-merge-write and its
// trust_policy.updated access row (detail: the patch and the merged policy)
// commit in one transaction.
func (s *server) patchTrustPolicy(w http.ResponseWriter, r *http.Request) {
	if s.platformRefuses(w, trustPlatformMsg) {
		return
	}
	var b struct {
		CustomerID            string  `json:"customerId"`
		ForkPolicy            *string `json:"forkPolicy"`
		ApprovalExpiryHours   *int64  `json:"approvalExpiryHours"`
		ApprovalExpirySeconds *int64  `json:"approvalExpirySeconds"`
	}
	if !decodeBody(w, r, &b) {
		return
	}
	switch {
	case customerIDProblem(b.CustomerID) != "":
		writeError(w, http.StatusBadRequest, customerIDProblem(b.CustomerID))
		return
	case b.ForkPolicy == nil && b.ApprovalExpiryHours == nil && b.ApprovalExpirySeconds == nil:
		writeError(w, http.StatusBadRequest, "No trust policy fields to update (forkPolicy, approvalExpiryHours, approvalExpirySeconds)")
		return
	case b.ForkPolicy != nil && *b.ForkPolicy != store.ForkIgnore && *b.ForkPolicy != store.ForkHold && *b.ForkPolicy != store.ForkAllow:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("forkPolicy %q must be ignore, hold or allow", *b.ForkPolicy))
		return
	case b.ApprovalExpiryHours != nil && (*b.ApprovalExpiryHours < 1 || *b.ApprovalExpiryHours > maxApprovalExpiryHours):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("approvalExpiryHours must be an integer from 1 to %d (one year)", maxApprovalExpiryHours))
		return
	case b.ApprovalExpirySeconds != nil && (*b.ApprovalExpirySeconds < trustpolicy.MinApprovalExpirySeconds || *b.ApprovalExpirySeconds > maxApprovalExpirySeconds):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("approvalExpirySeconds must be an integer from %d to %d (one year)", trustpolicy.MinApprovalExpirySeconds, maxApprovalExpirySeconds))
		return
	}
	patch := map[string]any{}
	if b.ForkPolicy != nil {
		patch["forkPolicy"] = *b.ForkPolicy
	}
	if b.ApprovalExpiryHours != nil {
		patch["approvalExpiryHours"] = *b.ApprovalExpiryHours
	}
	if b.ApprovalExpirySeconds != nil {
		patch["approvalExpirySeconds"] = *b.ApprovalExpirySeconds
	}
	audit := auditEntry(r, "trust_policy.updated", "trust_policy:"+b.CustomerID, "")
	p, err := s.d.Store.UpdateTrustPolicyAudited(r.Context(), b.CustomerID, trustpolicy.Default(b.CustomerID), func(p *store.TrustPolicy) error {
		if b.ForkPolicy != nil {
			p.ForkPolicy = *b.ForkPolicy
		}
		switch {
		case b.ApprovalExpirySeconds != nil:
			p.ApprovalExpirySeconds = *b.ApprovalExpirySeconds
		case b.ApprovalExpiryHours != nil:
			p.ApprovalExpirySeconds = *b.ApprovalExpiryHours * 3600
		}
		p.Source = "local"
		detail, err := json.Marshal(map[string]any{"patch": patch, "policy": map[string]any{
			"forkPolicy": p.ForkPolicy, "approvalExpirySeconds": p.ApprovalExpirySeconds}})
		if err != nil {
			return err
		}
		audit.Detail = string(detail)
		return nil
	}, audit)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.TrustPolicyEnvelope{Policy: s.policyView(*p, true)})
}

// Directory input rules.
var (
	directoryUserRe = boundedre.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,254}$`, 1, 255)
	providerValueRe = boundedre.MustCompile(`^[^\s\x00-\x1f\x7f]{1,255}$`, 1, 255)
	// providerUserIDRe is a forge's numeric user id (GitHub's sender.id,
	// Gitea's and GitLab's user id): the immutable key a directory link
	// is found by, unlike the renameable username.
	providerUserIDRe = regexp.MustCompile(`^[0-9]{1,20}$`)
	// bitbucketUserIDRe is a Bitbucket account id: a braced UUID
	// ({xxxxxxxx-…}) or an Atlassian account id (557058:uuid, or 24 hex).
	bitbucketUserIDRe = regexp.MustCompile(`^(\{[0-9a-fA-F-]{36}\}|[0-9]{1,10}:[0-9a-fA-F-]{36}|[0-9a-fA-F]{24})$`)
)

// providerUserIDOK reports whether id has the shape of provider's
// immutable user id.
func providerUserIDOK(provider, id string) bool {
	if provider == "bitbucket" {
		return bitbucketUserIDRe.MatchString(id)
	}
	return providerUserIDRe.MatchString(id)
}

// DirectoryProviders are the forges an approval-directory link may name.
var DirectoryProviders = []string{"github", "gitea", "gitlab", "bitbucket"}

// serviceApproverPrefix starts the approver id of an admin-token decision
// ("service:<tokenId>", see decideHeldRun); a directory user may not
// borrow it, or a member could pass for an operator override.
const serviceApproverPrefix = "service:"

// directoryView returns org's directory, nil when it has no member.
func (s *server) directoryView(r *http.Request, org string) (*apitypes.DirectoryView, error) {
	members, err := s.d.Store.ListDirectoryMembers(r.Context(), org)
	if err != nil || len(members) == 0 {
		return nil, err
	}
	v := &apitypes.DirectoryView{CustomerID: org, IdentityLinks: []apitypes.IdentityLink{}, MemberCITrustLevels: map[string]string{}, TeamMemberships: []any{}}
	for _, m := range members {
		v.IdentityLinks = append(v.IdentityLinks, apitypes.IdentityLink{UserID: m.UserID, Provider: m.Provider, ProviderUsername: m.ProviderUsername, ProviderUserID: m.ProviderUserID})
		v.MemberCITrustLevels[m.UserID] = m.CITrust
		if m.UpdatedAt.After(v.UpdatedAt) {
			v.UpdatedAt = m.UpdatedAt
		}
	}
	return v, nil
}

// directoryEnvelope returns org's directory with platformManaged, or
// answers 500 and reports false.
func (s *server) directoryEnvelope(w http.ResponseWriter, r *http.Request, org string) (apitypes.DirectoryEnvelope, bool) {
	dir, err := s.directoryView(r, org)
	if err != nil {
		s.internalError(w, r, err)
		return apitypes.DirectoryEnvelope{}, false
	}
	return apitypes.DirectoryEnvelope{Directory: dir, PlatformManaged: platformConnected(s.d.Mode)}, true
}

// writeDirectory answers org's apitypes.DirectoryEnvelope.
func (s *server) writeDirectory(w http.ResponseWriter, r *http.Request, org string) {
	if env, ok := s.directoryEnvelope(w, r, org); ok {
		writeJSON(w, http.StatusOK, env)
	}
}

// getTrustDirectory is GET /trust-policy/directory?customerId=:
// {directory: null|apitypes.DirectoryView, platformManaged}.
func (s *server) getTrustDirectory(w http.ResponseWriter, r *http.Request) {
	org, ok := customerParam(w, r)
	if !ok {
		return
	}
	s.writeDirectory(w, r, org)
}

// patchTrustDirectory is PATCH /trust-policy/directory {customerId, userId,
// provider, providerUsername, providerUserId, ciTrust}: registers (or
// re-registers) a member, replacing the links of that user and of that
// provider user id; audited as trust_directory.updated.
func (s *server) patchTrustDirectory(w http.ResponseWriter, r *http.Request) {
	if s.platformRefuses(w, trustPlatformMsg) {
		return
	}
	var b struct {
		CustomerID       string `json:"customerId"`
		UserID           string `json:"userId"`
		Provider         string `json:"provider"`
		ProviderUsername string `json:"providerUsername"`
		ProviderUserID   string `json:"providerUserId"`
		CITrust          string `json:"ciTrust"`
	}
	if !decodeBody(w, r, &b) {
		return
	}
	msg := ""
	switch {
	case customerIDProblem(b.CustomerID) != "":
		msg = customerIDProblem(b.CustomerID)
	case strings.HasPrefix(b.UserID, serviceApproverPrefix):
		msg = `userId must not start with "service:": that prefix is reserved for admin-token approvers`
	case !directoryUserRe.MatchString(b.UserID):
		msg = "userId must be 1-255 characters: a letter or digit, then letters, digits or . _ @ : + - (no whitespace or control characters)"
	case !slices.Contains(DirectoryProviders, b.Provider):
		msg = fmt.Sprintf("provider %q must be one of %s", b.Provider, strings.Join(DirectoryProviders, ", "))
	case !providerValueRe.MatchString(b.ProviderUsername):
		msg = "providerUsername must be 1-255 characters without blanks"
	case !providerUserIDOK(b.Provider, b.ProviderUserID):
		msg = "providerUserId must be the provider's immutable user id (1-20 digits; for bitbucket the account id or {uuid}), not the username"
	case b.CITrust != store.CITrustNone && b.CITrust != store.CITrustRead && b.CITrust != store.CITrustWrite && b.CITrust != store.CITrustAdmin:
		msg = fmt.Sprintf("ciTrust %q must be none, read, write or admin", b.CITrust)
	}
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	m := &store.DirectoryMember{OrgID: b.CustomerID, UserID: b.UserID, Provider: b.Provider,
		ProviderUsername: b.ProviderUsername, ProviderUserID: b.ProviderUserID, CITrust: b.CITrust}
	detail, _ := json.Marshal(map[string]string{"op": "set", "userId": b.UserID, "provider": b.Provider,
		"providerUsername": b.ProviderUsername, "providerUserId": b.ProviderUserID, "ciTrust": b.CITrust})
	if err := s.d.Store.PutDirectoryMemberAudited(r.Context(), m,
		auditEntry(r, "trust_directory.updated", "trust_directory:"+b.CustomerID, string(detail))); err != nil {
		s.internalError(w, r, err)
		return
	}
	s.writeDirectory(w, r, b.CustomerID)
}

// deleteTrustDirectory is DELETE /trust-policy/directory?customerId=&userId=:
// removes every link of the user and its trust level; {directory,
// platformManaged, removed} (removed false, and no access row, when the user
// was not a member).
func (s *server) deleteTrustDirectory(w http.ResponseWriter, r *http.Request) {
	if s.platformRefuses(w, trustPlatformMsg) {
		return
	}
	org, ok := customerParam(w, r)
	if !ok {
		return
	}
	user := r.URL.Query().Get("userId")
	if !directoryUserRe.MatchString(user) {
		writeError(w, http.StatusBadRequest, "userId required")
		return
	}
	detail, _ := json.Marshal(map[string]string{"op": "remove", "userId": user})
	removed, err := s.d.Store.DeleteDirectoryMemberAudited(r.Context(), org, user,
		auditEntry(r, "trust_directory.updated", "trust_directory:"+org, string(detail)))
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	if env, ok := s.directoryEnvelope(w, r, org); ok {
		writeJSON(w, http.StatusOK, apitypes.DirectoryRemoval{DirectoryEnvelope: env, Removed: removed})
	}
}
