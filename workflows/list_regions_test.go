package workflows_test

import (
	"slices"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/workflows"
)

func TestListRegionsAnswersTheRegionsFile(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ListRegions)
	journal := &regiontest.Journal{}
	env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t,
		regiontest.New("west", "https://west.example:5240", journal),
		regiontest.New("east", "https://east.example:5240", journal))})
	env.ExecuteWorkflow(workflows.ListRegions)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := env.GetWorkflowResult(&names); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"east", "west"}) {
		t.Errorf("ListRegions = %v", names)
	}
}
