package integration

import "testing"

func abuseRack(t *testing.T, s *abuseStack) {}
