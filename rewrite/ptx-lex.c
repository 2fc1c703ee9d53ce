/* ptx-lex.c: the PTX tokenizer.
 *
 * Turns PTX text into tokens: identifiers (foo, %r1, $L__BB0_1), dot-words
 * (.u32, .shared::cta: PTX writes opcode modifiers, types, directives and
 * vector components all as ".word"), numbers (decimal, 0x hex, 0f/0d float
 * bit patterns, 1.5e-3), strings, punctuation, and whole @@DWARF lines.
 * Comments (// and C-style) vanish but leave the "whitespace before" mark.
 *
 * Every read is bounds-checked against len; the text need not be
 * NUL-terminated and may contain any bytes: a NUL, a stray byte, an
 * unterminated string or comment, or a # preprocessor line is refused with
 * its line and column.  Grammar (PTX ISA 9.0, section 4, "Syntax").
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
  rw__arena_t *a;
  const char *s;
  size_t len, pos;
  int line, col;
  rw__tok_t *v; /* malloc'd while lexing, copied into the arena at the end */
  size_t n, cap;
} lexer_t;

static bool is_ident_start(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

static bool is_ident_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}

static bool is_digit(int c) {
  return c >= '0' && c <= '9';
}

/* Control bytes (NUL above all: tokens are C strings) have no place in
 * strings or @@DWARF lines; a tab does. */
static bool is_bad_text_byte(int c) {
  return c >= 0 && c < 0x20 && c != '\t' && c != '\r';
}

static int peek(const lexer_t *lx, size_t off) {
  return lx->pos + off < lx->len ? (unsigned char)lx->s[lx->pos + off] : -1;
}

static void advance(lexer_t *lx, size_t n) {
  while (n-- > 0 && lx->pos < lx->len) {
    if (lx->s[lx->pos] == '\n') {
      lx->line++;
      lx->col = 1;
    } else {
      lx->col++;
    }
    lx->pos++;
  }
}

static int push(lexer_t *lx, int kind, size_t start, size_t end, bool space, bool nl, int line,
                int col) {
  if (lx->n == lx->cap) {
    size_t cap = lx->cap ? lx->cap * 2 : 1024;
    rw__tok_t *v = realloc(lx->v, cap * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
    lx->v = v;
    lx->cap = cap;
  }
  rw__tok_t *t = &lx->v[lx->n];
  t->kind = (uint8_t)kind;
  t->space = space;
  t->nl = nl;
  t->line = line;
  t->col = col;
  t->text = rw__strndup(lx->a, lx->s + start, end - start);
  if (t->text == NULL)
    return -ENOMEM;
  lx->n++;
  return 0;
}

/* Two-character punctuation that constant expressions in initializers use. */
static bool is_punct2(int c0, int c1) {
  static const char *const pairs[] = {"<<", ">>", "&&", "||", "==", "!=", "<=", ">="};
  for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
    if (pairs[i][0] == c0 && pairs[i][1] == c1)
      return true;
  return false;
}

int rw__lex(rw__arena_t *a, const char *text, size_t len, rw__tok_t **toks, size_t *ntoks,
            rw_diag_t *d) {
  /* PTX images handed to cuModuleLoadData, and PTX taken out of fatbins,
   * end in one or more NULs: they end the text, they are not in it */
  while (len > 0 && text[len - 1] == 0)
    len--;
  lexer_t lx = {.a = a, .s = text, .len = len, .line = 1, .col = 1};
  bool space = true, nl = true;
  int rc = 0;

  while (lx.pos < lx.len) {
    int c = peek(&lx, 0);
    int line = lx.line, col = lx.col;
    size_t start = lx.pos;

    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      advance(&lx, 1);
      space = true;
      continue;
    }
    if (c == '\n') {
      advance(&lx, 1);
      space = nl = true;
      continue;
    }
    if (c == '/' && peek(&lx, 1) == '/') {
      while (lx.pos < lx.len && peek(&lx, 0) != '\n')
        advance(&lx, 1);
      space = true;
      continue;
    }
    if (c == '/' && peek(&lx, 1) == '*') {
      advance(&lx, 2);
      while (lx.pos < lx.len && !(peek(&lx, 0) == '*' && peek(&lx, 1) == '/')) {
        if (peek(&lx, 0) == '\n')
          nl = true;
        advance(&lx, 1);
      }
      if (lx.pos >= lx.len) {
        rc = rw_diag_set(d, -EPROTO, line, col, "unterminated comment");
        goto out;
      }
      advance(&lx, 2);
      space = true;
      continue;
    }
    if (c == '@' && peek(&lx, 1) == '@') {
      /* @@DWARF: the rest of the line is opaque debug data. */
      while (lx.pos < lx.len && peek(&lx, 0) != '\n') {
        if (is_bad_text_byte(peek(&lx, 0))) {
          rc = rw_diag_set(d, -EPROTO, lx.line, lx.col, "byte 0x%02x in a @@DWARF line",
                           peek(&lx, 0));
          goto out;
        }
        advance(&lx, 1);
      }
      if ((rc = push(&lx, RW__TOK_RAWLINE, start, lx.pos, space, nl, line, col)) < 0)
        goto out;
    } else if (c == '#') {
      rc = rw_diag_set(d, -EPROTO, line, col, "preprocessor directives are not supported");
      goto out;
    } else if (is_ident_start(c)) {
      advance(&lx, 1);
      while (is_ident_char(peek(&lx, 0)))
        advance(&lx, 1);
      if (lx.pos - start == 1 && (c == '%' || c == '$')) {
        rc = rw_diag_set(d, -EPROTO, line, col, "'%c' not followed by a name", c);
        goto out;
      }
      if ((rc = push(&lx, RW__TOK_IDENT, start, lx.pos, space, nl, line, col)) < 0)
        goto out;
    } else if (c == '.' && is_ident_char(peek(&lx, 1))) {
      /* .u32, and also .2d / .4d (tensor dimensions start with a digit) */
      advance(&lx, 1);
      for (;;) {
        while (is_ident_char(peek(&lx, 0)))
          advance(&lx, 1);
        /* .shared::cta, .mbarrier::complete_tx::bytes */
        if (peek(&lx, 0) == ':' && peek(&lx, 1) == ':' && is_ident_char(peek(&lx, 2)))
          advance(&lx, 2);
        else
          break;
      }
      if ((rc = push(&lx, RW__TOK_DOTWORD, start, lx.pos, space, nl, line, col)) < 0)
        goto out;
    } else if (is_digit(c)) {
      int c1 = peek(&lx, 1);
      if (c == '0' && (c1 == 'x' || c1 == 'X' || c1 == 'f' || c1 == 'F' || c1 == 'd' || c1 == 'D' ||
                       c1 == 'b' || c1 == 'B')) {
        advance(&lx, 2);
        while (is_ident_char(peek(&lx, 0)))
          advance(&lx, 1);
      } else {
        while (is_digit(peek(&lx, 0)))
          advance(&lx, 1);
        if (peek(&lx, 0) == '.' && is_digit(peek(&lx, 1))) {
          advance(&lx, 1);
          while (is_digit(peek(&lx, 0)))
            advance(&lx, 1);
        }
        if ((peek(&lx, 0) == 'e' || peek(&lx, 0) == 'E') &&
            (is_digit(peek(&lx, 1)) ||
             ((peek(&lx, 1) == '+' || peek(&lx, 1) == '-') && is_digit(peek(&lx, 2))))) {
          advance(&lx, 2);
          while (is_digit(peek(&lx, 0)))
            advance(&lx, 1);
        }
        while (is_ident_char(peek(&lx, 0))) /* U suffix; junk is caught by ptxas' grammar */
          advance(&lx, 1);
      }
      if ((rc = push(&lx, RW__TOK_NUMBER, start, lx.pos, space, nl, line, col)) < 0)
        goto out;
    } else if (c == '"') {
      advance(&lx, 1);
      while (lx.pos < lx.len && peek(&lx, 0) != '"' && peek(&lx, 0) != '\n') {
        if (is_bad_text_byte(peek(&lx, 0))) {
          rc = rw_diag_set(d, -EPROTO, lx.line, lx.col, "byte 0x%02x in a string", peek(&lx, 0));
          goto out;
        }
        /* \" and \\ are escapes; other escaped bytes are checked as they come */
        if (peek(&lx, 0) == '\\' && (peek(&lx, 1) == '"' || peek(&lx, 1) == '\\'))
          advance(&lx, 1);
        advance(&lx, 1);
      }
      if (peek(&lx, 0) != '"') {
        rc = rw_diag_set(d, -EPROTO, line, col, "unterminated string");
        goto out;
      }
      advance(&lx, 1);
      if ((rc = push(&lx, RW__TOK_STRING, start, lx.pos, space, nl, line, col)) < 0)
        goto out;
    } else if (c > 0 && strchr(",;:[]{}()+-*/@!<>=|&^~?", c) != NULL) {
      advance(&lx, is_punct2(c, peek(&lx, 1)) ? 2 : 1);
      if ((rc = push(&lx, RW__TOK_PUNCT, start, lx.pos, space, nl, line, col)) < 0)
        goto out;
    } else {
      if (c >= 0x20 && c < 0x7f)
        rc = rw_diag_set(d, -EPROTO, line, col, "unexpected character '%c'", c);
      else
        rc = rw_diag_set(d, -EPROTO, line, col, "unexpected byte 0x%02x", c);
      goto out;
    }
    space = nl = false;
  }
  if ((rc = push(&lx, RW__TOK_EOF, lx.pos, lx.pos, true, true, lx.line, lx.col)) < 0)
    goto out;
  *toks = rw__alloc(a, lx.n * sizeof(rw__tok_t));
  if (*toks == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  memcpy(*toks, lx.v, lx.n * sizeof(rw__tok_t));
  *ntoks = lx.n;
out:
  free(lx.v);
  return rc;
}
