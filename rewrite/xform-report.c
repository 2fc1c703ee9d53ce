/* xform-report.c: the one-shot rw_transform_ptx(): parse, transform every
 * entry with every requested kind, print, and report per entry what was
 * added or refused and why.
 *
 * The entry list is taken before any transformation, so the entries added
 * here are never transformed again.  A refusal is an outcome recorded in the
 * report, not an error of the call; only parse failures and allocation
 * failures fail the call.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rw_xform_report_free(rw_xform_report_t *r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->n_entries; i++)
    free(r->entries[i].name);
  free(r->entries);
  r->entries = NULL;
  r->n_entries = 0;
}

int rw_transform_ptx(const char *ptx, size_t len, unsigned kinds_mask, char **out_ptx,
                     size_t *out_len, rw_xform_report_t *report) {
  rw_ptx_module_t *m = NULL;
  rw_xform_report_t r = {0};
  char **names = NULL;
  size_t n = 0;
  int rc;

  *out_ptx = NULL;
  if ((rc = rw_ptx_parse(ptx, len, &m, &r.parse_diag)) < 0) {
    r.parse_status = rc;
    goto out;
  }
  n = rw_ptx_entry_count(m);
  names = calloc(n ? n : 1, sizeof(*names));
  r.entries = calloc(n ? n : 1, sizeof(*r.entries));
  if (names == NULL || r.entries == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    names[i] = strdup(rw_ptx_entry_name(m, i));
    r.entries[i].name = strdup(names[i] ? names[i] : "");
    if (names[i] == NULL || r.entries[i].name == NULL) {
      r.n_entries = i + 1;
      rc = -ENOMEM;
      goto out;
    }
  }
  r.n_entries = n;
  for (size_t i = 0; i < n; i++) {
    rw_xform_entry_report_t *e = &r.entries[i];
    for (int k = 0; k < RW_XFORM_KIND_COUNT; k++) {
      rw_diag_t d = {0};
      rw_refusal_t why = RW_REFUSE_NONE;
      e->status[k] = 1;
      if (!(kinds_mask & RW_XFORM_MASK(k)))
        continue;
      rc = rw_xform_check(m, names[i], (rw_xform_kind_t)k, &why, &d);
      if (rc == 0)
        rc = rw_xform_apply(m, names[i], (rw_xform_kind_t)k, &d);
      if (rc == -ENOMEM)
        goto out;
      e->status[k] = rc;
      e->why[k] = rc == 0 ? RW_REFUSE_NONE : why;
      if (rc < 0 && why == RW_REFUSE_NONE)
        e->why[k] = RW_REFUSE_UNPARSED; /* an internal failure: counted, never hidden */
      if (rc < 0)
        rw_diag_format(&d, e->reason[k], sizeof(e->reason[k]));
    }
  }
  rc = rw_ptx_print(m, out_ptx, out_len);
out:
  if (names != NULL)
    for (size_t i = 0; i < n; i++)
      free(names[i]);
  free(names);
  rw_ptx_free(m);
  if (report != NULL)
    *report = r;
  else
    rw_xform_report_free(&r);
  return rc;
}
