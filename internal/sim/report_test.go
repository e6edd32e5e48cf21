package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The report's JSON carries each policy's summary and timeline; the HTML is
// offline (no script, no external resource) with one share and one TPS plot
// per scenario; the Markdown table has a row per policy.
func TestReportOutputs(t *testing.T) {
	sc := &Scenario{Name: "tiny <b>", Duration: Duration(time.Minute),
		Workload: Workload{Rate: 2, OutputTokens: []int{20}},
		Deployments: []Deployment{
			{Provider: "a", TTFT: Duration(10 * time.Millisecond), TPS: 2000,
				Phases: []Phase{{From: Duration(20 * time.Second), TPSFactor: 0.1}, {From: Duration(40 * time.Second)}}},
			{Provider: "b", TTFT: Duration(10 * time.Millisecond), TPS: 1000},
		}}
	rep := run(t, sc, Defaults(), Oracle())

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var back struct {
		Results []struct {
			Policy   string
			Summary  Summary
			Timeline []Bucket
		}
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Len(t, back.Results, 2)
	assert.Equal(t, "tpsroute", back.Results[0].Policy)
	assert.Len(t, back.Results[0].Timeline, buckets)
	assert.Contains(t, back.Results[0].Summary.Ratios, "oracle")
	kinds := []string{}
	for _, e := range back.Results[1].Summary.Events {
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, []string{"degrade", "recover"}, kinds)
	assert.Zero(t, back.Results[1].Summary.Events[0].CallsBeforeShed, "the oracle never sends to a degraded deployment")

	var h bytes.Buffer
	require.NoError(t, WriteHTML(&h, rep))
	page := h.String()
	assert.Equal(t, 2, strings.Count(page, "<svg"))
	assert.NotContains(t, page, "<script")
	assert.NotContains(t, page, "src=", "no external resource")
	assert.NotContains(t, page, "href=", "no external resource")
	assert.NotContains(t, page, "tiny <b>", "names are escaped")

	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Equal(t, 4, strings.Count(md.String(), "\n"), "header, rule and one row per policy")
}
