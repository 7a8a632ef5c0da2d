package api

import "testing"

func TestParsePowerAction(t *testing.T) {
	for _, a := range []PowerAction{PowerOn, PowerOff, PowerCycle} {
		if got, err := ParsePowerAction(string(a)); err != nil || got != a {
			t.Errorf("ParsePowerAction(%q) = %q, %v", a, got, err)
		}
	}
	for _, s := range []string{"", "reset", "ON"} {
		if _, err := ParsePowerAction(s); err == nil {
			t.Errorf("ParsePowerAction(%q) accepted", s)
		}
	}
}
