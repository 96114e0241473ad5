package spec

import (
	"go.yaml.in/yaml/v3"
)

// resolveMerges replaces every YAML merge key (`<<: *defaults`, or a list
// of aliases) in the tree below n with the pairs it merges, at its place,
// leaving out keys the mapping sets itself or that an earlier merge gave,
// as YAML 1.1's merge type says. The decoder reads mappings pair by pair,
// so without this `<<` was an unknown field; schema.json and editors take
// it (a new-user test sharing settings across specs). The merged pairs
// are copies, so that expanding variables in one place leaves the anchor
// as written for the next.
func resolveMerges(n *yaml.Node, r *reporter) {
	m := &merger{r: r, budget: maxMergedNodes}
	m.resolve(n)
}

// maxMergedNodes bounds the nodes merges may copy: each merge copies a
// mapping whose own merges are copies already, so a 1 KB file of nested
// merges doubled itself 22 times and ran validate out of memory. A real spec
// copies a few hundred.
const maxMergedNodes = 100_000

type merger struct {
	r      *reporter
	budget int
	failed bool
}

func (mg *merger) resolve(n *yaml.Node) {
	r := mg.r
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			mg.resolve(c)
		}
	case yaml.MappingNode:
		own := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !isMerge(n.Content[i]) {
				own[n.Content[i].Value] = true
			}
		}
		var out []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if !isMerge(k) {
				mg.resolve(v)
				out = append(out, k, v)
				continue
			}
			for _, m := range mergedMaps(v, r) {
				if mg.budget -= countNodes(m); mg.budget < 0 {
					if !mg.failed {
						mg.failed = true
						r.add(SevError, k.Line, k.Column, "", "merge keys here copy more than %d YAML nodes in all; merge less deeply", maxMergedNodes)
					}
					continue
				}
				m = copyNode(m)
				mg.resolve(m)
				for j := 0; j+1 < len(m.Content); j += 2 {
					if !own[m.Content[j].Value] {
						own[m.Content[j].Value] = true
						out = append(out, m.Content[j], m.Content[j+1])
					}
				}
			}
		}
		n.Content = out
	}
}

// countNodes counts the nodes copyNode copies of n.
func countNodes(n *yaml.Node) int {
	if n.Kind == yaml.AliasNode {
		return 1
	}
	c := 1
	for _, x := range n.Content {
		c += countNodes(x)
	}
	return c
}

// isMerge reports whether k is the merge key: `<<` written plain, or
// tagged !!merge.
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && (k.Tag == "!!merge" || k.Value == "<<" && k.Style == 0)
}

// mergedMaps is what a merge key's value merges, in order: one mapping
// (an alias of one, or one written in place) or a list of them.
func mergedMaps(v *yaml.Node, r *reporter) []*yaml.Node {
	var out []*yaml.Node
	var add func(n *yaml.Node, top bool)
	add = func(n *yaml.Node, top bool) {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch {
		case n.Kind == yaml.MappingNode:
			out = append(out, n)
		case n.Kind == yaml.SequenceNode && top:
			for _, c := range n.Content {
				add(c, false)
			}
		default:
			r.add(SevError, v.Line, v.Column, "", "<< merges a mapping or a list of mappings, got %s", describe(n))
		}
	}
	add(v, true)
	return out
}

// copyNode copies the tree below n. An alias inside stays an alias, read
// where it points as any alias is: following them here could copy an
// alias bomb's exponential tree.
func copyNode(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		return n
	}
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		c.Content[i] = copyNode(x)
	}
	return &c
}
