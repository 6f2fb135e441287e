package scaler

import "kici.dev/kici/internal/scaler/scalerconfig"

// The scalers.yaml shapes live in package scalerconfig, which links no
// dispatch or store code so that `kici preview` can load the file offline.
// The manager and its backends use them under these names.
type (
	// Config is a validated scalers.yaml (scalerconfig.Config).
	Config = scalerconfig.Config
	// Entry is one scaler (scalerconfig.Entry).
	Entry = scalerconfig.Entry
	// LabelSet is one agent shape of a scaler (scalerconfig.LabelSet).
	LabelSet = scalerconfig.LabelSet
	// Limits are a label set's resolved resources (scalerconfig.Limits).
	Limits = scalerconfig.Limits
	// Platform is a scaler's os/arch (scalerconfig.Platform).
	Platform = scalerconfig.Platform
	// ConfigError is a validation failure (scalerconfig.ConfigError).
	ConfigError = scalerconfig.ConfigError
	// Toleration is a kubernetes label set's pod toleration
	// (scalerconfig.Toleration).
	Toleration = scalerconfig.Toleration
	// FirecrackerNetwork is the firecracker: block (scalerconfig.FirecrackerNetwork).
	FirecrackerNetwork = scalerconfig.FirecrackerNetwork
)

// BackendType is a scaler's backend type (scalerconfig.BackendType).
type BackendType = scalerconfig.BackendType

// Backend types of scalers.yaml (scalerconfig).
const (
	TypeBareMetal   = scalerconfig.TypeBareMetal
	TypeContainer   = scalerconfig.TypeContainer
	TypeFirecracker = scalerconfig.TypeFirecracker
	TypeQEMU        = scalerconfig.TypeQEMU
	TypeKubernetes  = scalerconfig.TypeKubernetes
)
