// Package helpdesk embeds the sample domain of voiced: the customer help
// desk of Maple Street, a fictional online store. The files are embedded so
// the binary works from any working directory; the same folder can be
// loaded from disk with domain.Load. Format: docs/domain.md.
package helpdesk

import "embed"

// FS holds the domain folder (intents, articles and evaluation sets) with
// paths relative to the folder, e.g. "intents.yaml", "articles/gift-cards.md".
//
//go:embed intents.yaml pronunciations.dict spoken.tsv articles/*.md classes/*.txt eval/*.yaml eval/*.tsv
var FS embed.FS
