package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/mock"

	"github.com/ironflow/ironflow/workflows"
)

// A move records who started it in its memo from the grant its validation verified, so a
// start through the Temporal CLI (which sets no memo) shows it too.
func TestMigrateMachineRecordsStartedByFromTheGrant(t *testing.T) {
	f := newFixture(t)
	var memos []map[string]any
	f.env.OnUpsertMemo(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		memos = append(memos, args.Get(0).(map[string]any))
	})
	res, err := f.run(input())
	if err != nil {
		t.Fatal(err)
	}
	if len(memos) != 1 || memos[0][workflows.MemoStartedBy] != res.StartedBy || res.StartedBy == "" {
		t.Errorf("memo upserts %v, want one with %s=%q", memos, workflows.MemoStartedBy, res.StartedBy)
	}
}
