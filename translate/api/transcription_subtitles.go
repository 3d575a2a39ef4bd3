package api

import (
	"math"
	"strconv"
	"strings"
)

// Cue is one subtitle: start and end in seconds, and its text.
type Cue struct {
	Start, End float64
	Text       string
}

// AppendSRT renders cues as SubRip, the way OpenAI answers srt: cues
// numbered from 1, HH:MM:SS,mmm times, the text trimmed, each Cue followed
// by a blank line. Segments without text get no Cue.
func AppendSRT(dst []byte, cues []Cue) []byte {
	n := 0
	for _, c := range cues {
		text := CueText(c.Text)
		if text == "" {
			continue
		}
		n++
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, '\n')
		dst = appendCue(dst, c, text, ',')
	}
	return dst
}

// AppendVTT renders cues as WebVTT, the way OpenAI answers vtt: the
// WEBVTT header, then cues with HH:MM:SS.mmm times.
func AppendVTT(dst []byte, cues []Cue) []byte {
	dst = append(dst, "WEBVTT\n\n"...)
	for _, c := range cues {
		if text := CueText(c.Text); text != "" {
			dst = appendCue(dst, c, text, '.')
		}
	}
	return dst
}

func appendCue(dst []byte, c Cue, text string, msSep byte) []byte {
	start := cueMillis(c.Start)
	end := max(cueMillis(c.End), start)
	dst = appendTimestamp(dst, start, msSep)
	dst = append(dst, " --> "...)
	dst = appendTimestamp(dst, end, msSep)
	dst = append(dst, '\n')
	dst = append(dst, text...)
	return append(dst, "\n\n"...)
}

// maxCueMillis caps times at 99:59:59.999, so that every timestamp has
// the fixed HH:MM:SS width.
const maxCueMillis = 100*3600*1000 - 1

// cueMillis rounds seconds to milliseconds; negative, NaN and huge times
// are clamped.
func cueMillis(seconds float64) int64 {
	ms := math.Round(seconds * 1000)
	switch {
	case !(ms > 0): // also NaN
		return 0
	case ms > maxCueMillis:
		return maxCueMillis
	}
	return int64(ms)
}

func appendTimestamp(dst []byte, ms int64, msSep byte) []byte {
	two := func(dst []byte, n int64) []byte { return append(dst, byte('0'+n/10), byte('0'+n%10)) }
	dst = two(dst, ms/3600000)
	dst = append(dst, ':')
	dst = two(dst, ms/60000%60)
	dst = append(dst, ':')
	dst = two(dst, ms/1000%60)
	dst = append(dst, msSep)
	n := ms % 1000
	return append(dst, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
}

// CueText is a segment's text as one Cue's payload: trimmed (Whisper
// segments start with a space), line ends normalized, without blank lines
// (a blank line ends a Cue) and without "-->" (it marks a timing line).
// Empty means the segment has no text and gets no Cue.
func CueText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	kept := lines[:0]
	for _, l := range lines {
		for strings.Contains(l, "-->") {
			l = strings.ReplaceAll(l, "-->", "->")
		}
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}
