package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Search attributes set by the migration workflows; all keywords but MachineUuids, the
// machines of a MigrateMachineBatch.
var (
	MachineUuidsKey   = temporal.NewSearchAttributeKeyKeywordList("MachineUuids")
	MachineUuidKey    = temporal.NewSearchAttributeKeyKeyword("MachineUuid")
	MachineNameKey    = temporal.NewSearchAttributeKeyKeyword("MachineName")
	SourceRegionKey   = temporal.NewSearchAttributeKeyKeyword("SourceRegion")
	TargetRegionKey   = temporal.NewSearchAttributeKeyKeyword("TargetRegion")
	RackUuidKey       = temporal.NewSearchAttributeKeyKeyword("RackUuid")
	MigrationPhaseKey = temporal.NewSearchAttributeKeyKeyword("MigrationPhase")
)

// SearchAttributes lists every custom search attribute a namespace needs for these workflows.
func SearchAttributes() []temporal.SearchAttributeKey {
	return []temporal.SearchAttributeKey{MachineUuidKey, MachineUuidsKey, MachineNameKey, SourceRegionKey, TargetRegionKey, RackUuidKey, MigrationPhaseKey}
}

// upsertPhase records the phase a workflow is in, for `temporal workflow list --query`.
func upsertPhase(ctx workflow.Context, phase string) error {
	return workflow.UpsertTypedSearchAttributes(ctx, MigrationPhaseKey.ValueSet(phase))
}
