/* Where mkb finds its data (problems/, grader/, templates/) and its Python. */
#ifndef MKB_PATHS_H
#define MKB_PATHS_H

/* The project root: $MKB_ROOT, else the folder above the binary's own folder
 * when it holds problems/, else the current directory. Caller frees. */
char *paths_root(void);
/* The grader's interpreter: $MKB_PYTHON, else <root>/build/python (a link
 * made by tools/bootstrap.sh), else "python3". Caller frees. */
char *paths_python(const char *root);
/* The results store: $MKB_STORE, else <root>/mkb.db. Caller frees. */
char *paths_store(const char *root);
/* Is path dir itself or inside it? (plain string test on absolute paths) */
int paths_within(const char *path, const char *dir);

#endif
