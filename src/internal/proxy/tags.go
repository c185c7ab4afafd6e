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
	// MaxTags and MaxTagBytes bound the tags of one answer. An answer with
	// more, or a longer one, is shared but never kept: a purge by a tag it
	// could not record would miss it.
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

// takeTags takes the tags header out of md, the backend's answer metadata
// the proxy owns, unless the proxy forwards it to callers.
func (p *Proxy) takeTags(md metadata.MD) tagged {
	if p.tagsHeader == "" {
		return tagged{}
	}
	vs, ok := md[p.tagsHeader]
	if !ok {
		return tagged{}
	}
	if !p.forwardTags {
		delete(md, p.tagsHeader)
	}
	var t tagged
	t.header = metadata.MD{p.tagsHeader: vs}
	for _, v := range vs {
		for tag := range strings.FieldsFuncSeq(v, isTagSeparator) {
			if len(t.tags) == MaxTags || len(tag) > MaxTagBytes {
				t.overflow = true
				return t
			}
			t.tags = append(t.tags, tag)
		}
	}
	return t
}

func isTagSeparator(r rune) bool {
	return r == ',' || r == ' ' || r == '\t'
}

// has reports whether the answer carries tag.
func (t *tagged) has(tag string) bool {
	return slices.Contains(t.tags, tag)
}
