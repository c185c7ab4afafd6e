package proxy

import (
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"
)

// Tags (surrogate keys, as Varnish's xkey and Fastly's Surrogate-Key): an
// answer names its tags in a response header, and a purge by tag takes
// back every answer that named it.
const (
	// DefaultTagsHeader is the response header an answer names its tags
	// in, separated by spaces or commas.
	DefaultTagsHeader = "collapser-tags"
	// MaxTags and MaxTagBytes bound the tags of one answer (its tags
	// header's and its cache groups together; RFC 9875 asks for at least
	// 32 of 32 characters). An answer with more, or a longer one, is shared
	// but never kept: a purge by a tag it could not record would miss it.
	MaxTags     = 32
	MaxTagBytes = 128
)

// tagged is what the tags header of an answer says.
type tagged struct {
	tags []string // the tags, substrings of header's values
	// header holds the tags header alone, to pass on to a forwarder (it
	// keeps copies of its own, which a purge by tag must find too).
	header   metadata.MD
	overflow bool // more than MaxTags tags, or one longer than MaxTagBytes
}

// takeTags reads the tags of md, the backend's answer metadata the proxy
// owns: those of the tags header, which it takes out unless the proxy
// forwards it to callers, and the groups of CacheGroupsHeader, which stays.
func (p *Proxy) takeTags(md metadata.MD) tagged {
	var t tagged
	if vs, ok := md[p.tagsHeader]; ok && p.tagsHeader != "" {
		if !p.forwardTags {
			delete(md, p.tagsHeader)
		}
		t.header = metadata.MD{p.tagsHeader: vs}
		for _, v := range vs {
			for tag := range strings.FieldsFuncSeq(v, isTagSeparator) {
				if !t.add(tag) {
					return t
				}
			}
		}
	}
	for _, v := range md[CacheGroupsHeader] {
		groups, ok := parseStringList(v)
		if !ok {
			t.overflow = true // groups it cannot read: never kept
			return t
		}
		for _, g := range groups {
			if !t.add(g) {
				return t
			}
		}
	}
	return t
}

// hasTags reports whether md names tags: it has the tags header or
// CacheGroupsHeader.
func (p *Proxy) hasTags(md metadata.MD) bool {
	_, groups := md[CacheGroupsHeader]
	_, tags := md[p.tagsHeader]
	return groups || tags && p.tagsHeader != ""
}

// add adds tag, and reports false when it is one too many, or too long:
// the answer then overflows.
func (t *tagged) add(tag string) bool {
	if len(t.tags) == MaxTags || len(tag) > MaxTagBytes {
		t.overflow = true
		return false
	}
	t.tags = append(t.tags, tag)
	return true
}

func isTagSeparator(r rune) bool {
	return r == ',' || r == ' ' || r == '\t'
}

// has reports whether the answer carries tag.
func (t *tagged) has(tag string) bool {
	return slices.Contains(t.tags, tag)
}
