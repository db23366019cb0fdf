/* charset.h -- internal to src/data (not installed): what a text that is not UTF-8 probably is,
 * so that the loader's one-line error can say which iconv command converts it.
 *
 * The guess reads a window of at most AG__CHARSET_WINDOW bytes from the first invalid UTF-8
 * sequence and says a name only when the window reads as plain text in that encoding:
 *   GBK     (GB2312's superset, the usual encoding of Chinese text on Windows): a character
 *           outside ASCII is two bytes, a lead 0x81..0xFE and a trail 0x40..0x7E or 0x80..0xFE.
 *           Chinese text is runs of such pairs whose trail is a high byte, so: at least 2
 *           pairs with a high trail, more of those than pairs with an ASCII trail, and at most
 *           one high byte that starts no pair for every 8 pairs.
 *   LATIN1  (ISO 8859-1, Western European text): an accented letter is one byte 0xA0..0xFF
 *           between ASCII letters (two at most, as in "Größe"), so: at least 2 high bytes, and
 *           half of them or more stand alone (ASCII on both sides).
 *   CP1252  (Windows-1252): the same, with a byte 0x80..0x9F among them (C1 controls in
 *           Latin-1, never text; Windows-1252's quotes, dashes and euro), none of the five it
 *           leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D).
 * A control byte (below 0x20 other than tab, newline, VT, FF and CR; or 0x7F) says binary:
 * no guess. So random bytes, and a single stray byte, get none. */
#ifndef AG_DATA_CHARSET_H
#define AG_DATA_CHARSET_H

#include <stddef.h>

#define AG__CHARSET_WINDOW 256

/* The iconv name ("GBK", "LATIN1", "CP1252") of what s[at .. at + AG__CHARSET_WINDOW) looks
 * like, or NULL when it looks like none of them. at: the offset of the first invalid UTF-8
 * sequence of s [len]. */
const char *ag__charset_guess(const unsigned char *s, size_t len, size_t at);

#endif
