package rules

// compile builds the matcher on first use. Patterns that fail to compile can
// only come from a hand-built Rules (Parse rejects them); they match nothing
// rather than panic.
func (r *Rules) compile() *matcher {
	r.once.Do(func() {
		m := &matcher{rules: make([]compiled, len(r.Rules))}
		for i := range r.Rules {
			rule := &r.Rules[i]
			c := &m.rules[i]
			c.rule = rule
			var bad1, bad2 *problem
			c.pkg, bad1 = parsePkgPattern(rule.Package)
			c.fn, bad2 = parseFuncGlob(rule.Func)
			c.invalid = bad1 != nil || bad2 != nil
			for _, x := range rule.Exclude {
				if g, bad := parseFuncGlob(x); bad == nil {
					c.exclude = append(c.exclude, g)
				}
			}
		}
		r.m = m
	})
	return r.m
}

// MatchPackage reports whether any rule can select functions of the package
// importPath. It looks at package patterns only, so it is cheap enough to
// decide whether a package needs parsing at all.
func (r *Rules) MatchPackage(importPath string) bool {
	m := r.compile()
	for i := range m.rules {
		if !m.rules[i].invalid && m.rules[i].pkg.match(importPath) {
			return true
		}
	}
	return false
}

// Match returns the first rule that selects the function funcName of the
// package importPath. funcName is "Func" or "Type.Method" (see the package
// documentation); "(*Type).Method", "*Type.Method" and type parameter lists
// are tolerated and stripped. Match records the hit for Unused and is safe
// for concurrent use.
func (r *Rules) Match(importPath, funcName string) (rule *Rule, ok bool) {
	m := r.compile()
	recv, name, isMethod := splitFuncName(funcName)
	for i := range m.rules {
		c := &m.rules[i]
		if c.invalid || !c.pkg.match(importPath) || !c.fn.match(recv, name, isMethod) || c.excluded(recv, name, isMethod) {
			continue
		}
		// Load first: once set, the flag stays set, and a plain load keeps
		// concurrent matchers from contending on the cache line.
		if !c.hit.Load() {
			c.hit.Store(true)
		}
		return c.rule, true
	}
	return nil, false
}

func (c *compiled) excluded(recv, name string, isMethod bool) bool {
	for i := range c.exclude {
		if c.exclude[i].match(recv, name, isMethod) {
			return true
		}
	}
	return false
}

// Unused returns, in file order, the rules that Match has not returned so
// far: rules that select nothing are usually typos in a pattern (see
// Unmatched, for a whole binary).
func (r *Rules) Unused() []Rule {
	m := r.compile()
	var unused []Rule
	for i := range m.rules {
		if !m.rules[i].hit.Load() {
			unused = append(unused, *m.rules[i].rule)
		}
	}
	return unused
}
