/* charset.c -- see charset.h: GBK, Latin-1 or Windows-1252, guessed from the bytes where a text
 * stops being UTF-8. Cheap (one window of 256 bytes, read two or three times) and honest: it
 * names an encoding only when the window reads as ordinary text in it, and says nothing else. */
#include <stdbool.h>
#include "charset.h"

/* A byte no text holds: C0 controls other than tab, LF, VT, FF, CR; and DEL. */
static bool is_control(unsigned b)
{
    return (b < 0x20 && !(b >= 0x09 && b <= 0x0D)) || b == 0x7F;
}

/* GBK's two-byte characters in s[from .. to): pairs whose trail is a high byte (Chinese text),
 * pairs whose trail is ASCII (GBK's extension, or ASCII read as a trail), and high bytes that
 * start no pair. A lead the window cuts from its trail counts as nothing. */
typedef struct {
    int hi_pairs, lo_pairs, bad;
} gbk_count;

static gbk_count gbk_scan(const unsigned char *s, size_t from, size_t to)
{
    gbk_count c = { 0, 0, 0 };
    for (size_t i = from; i < to;) {
        unsigned b = s[i];
        if (b < 0x80 || i + 1 == to) {
            i++;
            continue;
        }
        unsigned t = s[i + 1];
        bool lead = b >= 0x81 && b <= 0xFE;
        bool hi = t >= 0x80 && t <= 0xFE, lo = t >= 0x40 && t <= 0x7E;
        if (lead && (hi || lo)) {
            c.hi_pairs += hi;
            c.lo_pairs += lo;
            i += 2;
        } else {
            c.bad++;
            i++;
        }
    }
    return c;
}

static bool looks_gbk(const unsigned char *s, size_t from, size_t to)
{
    gbk_count c = gbk_scan(s, from, to);
    return c.hi_pairs >= 2 && c.hi_pairs > c.lo_pairs && c.bad * 8 <= c.hi_pairs + c.lo_pairs;
}

/* The five bytes Windows-1252 leaves undefined. */
static bool cp1252_undefined(unsigned b)
{
    return b == 0x81 || b == 0x8D || b == 0x8F || b == 0x90 || b == 0x9D;
}

/* "LATIN1" or "CP1252" when at least half the high bytes of s[from .. to) stand alone between
 * ASCII bytes, as accented letters do in Western European text; else NULL. */
static const char *latin_guess(const unsigned char *s, size_t from, size_t to)
{
    int high = 0, alone = 0;
    bool c1 = false;
    for (size_t i = from; i < to; i++) {
        unsigned b = s[i];
        if (b < 0x80) continue;
        if (b < 0xA0 && cp1252_undefined(b)) return NULL;
        c1 |= b < 0xA0;
        high++;
        alone += (i == 0 || s[i - 1] < 0x80) && (i + 1 == to || s[i + 1] < 0x80);
    }
    if (high < 2 || alone * 2 < high) return NULL;
    return c1 ? "CP1252" : "LATIN1";
}

const char *ag__charset_guess(const unsigned char *s, size_t len, size_t at)
{
    if (!s || at >= len) return NULL;
    size_t to = len - at > AG__CHARSET_WINDOW ? at + AG__CHARSET_WINDOW : len;
    for (size_t i = at; i < to; i++)
        if (is_control(s[i])) return NULL;
    /* UTF-8 may have read a GBK lead with the bytes before it, so at can be a trail: try the
     * window from the byte before too */
    if (looks_gbk(s, at, to) || (at > 0 && s[at - 1] >= 0x80 && looks_gbk(s, at - 1, to))) return "GBK";
    return latin_guess(s, at, to);
}
