/* Fingerprints of what an evaluation ran: the problem's files, the grader's
 * sources. A changed input changes the fingerprint, so stale results can be
 * told from current ones. */
#ifndef MKB_FINGERPRINT_H
#define MKB_FINGERPRINT_H

/* sha256 over "name\0content\0" of each file in order. 0 or -1 (error printed). */
int fingerprint_files(const char *dir, const char *const *names, int n, char hex[65]);
/* The same over every file in dir whose name ends in suffix, in name order. */
int fingerprint_dir(const char *dir, const char *suffix, char hex[65]);

#endif
