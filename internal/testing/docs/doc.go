// Package docs holds the checks of the project's documentation, as GitHub
// renders it: every relative link of README.md, BENCHMARKS.md and docs/
// leads to a file of the repository and, with a #fragment, to a heading of
// that file; and docs/architecture.md names every package of the module.
// The manual lives in several pages that link to each other's sections,
// so a renamed heading or a moved file breaks links no compiler sees.
package docs
