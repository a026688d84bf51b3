package gemini

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// canonical puts in one order what Gemini CLI 0.61.0's requests list in
// none: the agent skills it found (it globs their folders, and the glob
// answers in no fixed order), listed in the system prompt's
// <available_skills>, in activate_skill's description ("(Available: 'a',
// 'b')") and in its parameter's enum. A replay's request would otherwise
// differ from the recording's whenever the glob answered the other way
// (seen in the real-CLI replay tests).
func canonical(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if s, ok := e.(string); ok {
				t[k] = sortSkills(s)
				continue
			}
			if k == "enum" && t["type"] == "string" {
				sortStrings(e)
				continue
			}
			canonical(e)
		}
	case []any:
		for i, e := range t {
			if s, ok := e.(string); ok {
				t[i] = sortSkills(s)
				continue
			}
			canonical(e)
		}
	}
}

// Compiled when first used, not at every tine start.
var (
	skillsBlock = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?s)(<available_skills>\n)(.*?)(\n</available_skills>)`)
	})
	skillEntry = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)  <skill>\n.*?\n  </skill>`) })
	available  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\(Available: ('[^']*'(?:, '[^']*')*)\)`) })
)

// sortSkills sorts the skills a string lists.
func sortSkills(s string) string {
	if strings.Contains(s, "<available_skills>") {
		s = skillsBlock().ReplaceAllStringFunc(s, func(b string) string {
			m := skillsBlock().FindStringSubmatch(b)
			items := skillEntry().FindAllString(m[2], -1)
			if strings.Join(items, "\n") != m[2] {
				return b // not only skills: leave it as it is
			}
			slices.Sort(items)
			return m[1] + strings.Join(items, "\n") + m[3]
		})
	}
	if strings.Contains(s, "(Available: '") {
		s = available().ReplaceAllStringFunc(s, func(b string) string {
			names := strings.Split(available().FindStringSubmatch(b)[1], ", ")
			slices.Sort(names)
			return "(Available: " + strings.Join(names, ", ") + ")"
		})
	}
	return s
}

// sortStrings sorts an array of strings in place (an enum).
func sortStrings(v any) {
	a, ok := v.([]any)
	if !ok {
		return
	}
	for _, e := range a {
		if _, ok := e.(string); !ok {
			return
		}
	}
	slices.SortFunc(a, func(x, y any) int { return strings.Compare(x.(string), y.(string)) })
}
