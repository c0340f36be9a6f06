package llm

import (
	"net/http"
	"testing"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

func newOtherProvider(t *testing.T, name, url string, client *http.Client) provider.Provider {
	t.Fatalf("no test provider %q", name)
	return nil
}
