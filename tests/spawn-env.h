/* spawn-env.h: a child's environment, made before fork.
 *
 * A test process that forks while other threads run (tallyd in a thread,
 * a sanitizer's allocator) may only make async-signal-safe calls in the
 * child before exec: a malloc there can wait forever for a lock another
 * thread held at the fork.  setenv and putenv allocate, so a child that
 * needs more variables gets them from spawn_env, called in the parent, and
 * passes the result to execve.
 */
#ifndef TALLY_TESTS_SPAWN_ENV_H
#define TALLY_TESTS_SPAWN_ENV_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* This process's environment with each NAME=VALUE of the n entries of extra
 * (NULL ones are skipped) put in place of the variable of that name, or
 * added.  A malloc'd array of borrowed strings: free() only the
 * array, after the fork.  NULL when out of memory. */
__attribute__((unused)) static char **spawn_env(const char *const *extra, size_t n) {
  size_t have = 0, k = 0;
  while (environ && environ[have])
    have++;
  char **env = malloc((have + n + 1) * sizeof(*env));
  if (!env)
    return NULL;
  for (size_t i = 0; i < have; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t len = eq ? (size_t)(eq - environ[i]) + 1 : strlen(environ[i]);
    bool replaced = false;
    for (size_t j = 0; j < n && !replaced; j++)
      replaced = extra[j] && strncmp(extra[j], environ[i], len) == 0;
    if (!replaced)
      env[k++] = environ[i];
  }
  for (size_t j = 0; j < n; j++)
    if (extra[j])
      env[k++] = (char *)extra[j];
  env[k] = NULL;
  return env;
}

#endif /* TALLY_TESTS_SPAWN_ENV_H */
