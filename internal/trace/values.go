package trace

import (
	"debug/elf"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/values"
)

// describeValues gives the sites whose probe tables record layouts the
// reads of their values (see internal/values), and returns what names
// the binary's types for interfaces, nil when it cannot (an error says
// why: a PIE, or no Go runtime data).
func describeValues(sites []site, binary string) (values.Namer, error) {
	for i := range sites {
		s := &sites[i]
		if len(s.table.Args) != len(s.args) {
			continue
		}
		var ls []*layout.Type
		for j, a := range s.table.Args {
			if a.Layout == "" {
				continue
			}
			l, err := layout.Decode(a.Layout)
			if err != nil {
				continue // a layout newer than this tracer: the address shows
			}
			if ls == nil {
				ls = make([]*layout.Type, len(s.args))
			}
			ls[j] = l
		}
		if ls != nil {
			s.layouts, s.plan = ls, values.NewPlan(ls)
		}
	}
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	names, err := values.NewTypeNames(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return names.Type, nil
}

// decodeValue decodes argument i of an event b of site s, whose raw value
// is raw, when the site reads its value.
func (s *site) decodeValue(i int, raw uint64, b []byte, names values.Namer) values.Value {
	if s.plan == nil || s.layouts[i] == nil || len(b) < valsSize {
		return nil
	}
	v, ok := s.plan.Decode(i, s.layouts[i], raw, b[evVals:valsSize], names)
	if !ok {
		return nil
	}
	return v
}
