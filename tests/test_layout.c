/* test_layout.c -- the dependency direction of docs/ARCHITECTURE.md ("Layers"), checked on every
 * #include of the source tree:
 *
 *     tools -> model -> {kv, quant, io, tok} -> {cpu, cuda} -> common -> core
 *
 * A file under src/<F>/ may include a header of its own folder, of a folder on a LOWER layer, or
 * the public headers (turboquant.h, turboquant/...); never a folder on its own layer (kv and io
 * do not see each other, nor cpu and cuda) or above. tools/ includes only the public headers and
 * tools/ headers. System headers (<...>) other than the public ones are not checked.
 *
 * Usage: test_layout [ROOT]   (ROOT holds src/ and tools/; default: the current directory, which
 * ctest sets to the source tree). Every violation is printed as FILE:LINE: message and fails the
 * test. ALLOW below lists the known violations not fixed yet: each one still present is printed
 * as a warning (and does not fail); an entry no longer needed is printed too, so it can go. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "t.h"

/* the layers, lowest first; a folder may include only folders of a lower rank (or itself) */
static const struct {
    const char *dir;
    int rank;
} layers[] = {
    {"core", 0}, {"common", 1}, {"cpu", 2}, {"cuda", 2}, {"kv", 3},
    {"quant", 3}, {"io", 3},    {"tok", 3}, {"model", 4},
};
#define N_LAYERS (int)(sizeof(layers) / sizeof(layers[0]))

/* Known violations not fixed yet ("file", "included path", why). Keep this list empty. */
static const struct {
    const char *file, *inc, *why;
} allow[] = {
    {"src/cuda/kv_cuda.cuh", "kv/kv_internal.h",
     "tq_kv_row_bytes1() of the codec module; the CUDA side of issue 12 item 4"},
};
#define N_ALLOW (int)(sizeof(allow) / sizeof(allow[0]))
static int allow_used[N_ALLOW];

static int n_files, n_includes, n_bad, n_warn;

static int rank_of(const char *dir, size_t len)
{
    for (int i = 0; i < N_LAYERS; i++)
        if (strlen(layers[i].dir) == len && !memcmp(layers[i].dir, dir, len))
            return layers[i].rank;
    return -1;
}

static int is_public(const char *inc)
{
    return !strcmp(inc, "turboquant.h") || !strncmp(inc, "turboquant/", 11);
}

static void violation(const char *file, int line, const char *inc, const char *fmt,
                      const char *arg)
{
    for (int i = 0; i < N_ALLOW; i++)
        if (!strcmp(allow[i].file, file) && !strcmp(allow[i].inc, inc)) {
            printf("WARNING %s:%d: includes \"%s\" against the layers (allowlisted: %s)\n", file,
                   line, inc, allow[i].why);
            allow_used[i] = 1;
            n_warn++;
            return;
        }
    printf("%s:%d: #include \"%s\": ", file, line, inc);
    printf(fmt, arg);
    printf("\n");
    n_bad++;
}

/* `inc` as written in `file` (folder `dir` = "tools" or the src/ folder) */
static void check_include(const char *root, const char *file, const char *dir, int line,
                          const char *inc)
{
    n_includes++;
    if (strstr(inc, "..")) {
        violation(file, line, inc, "no \"..\" in include paths: name the header by its folder%s",
                  "");
        return;
    }
    if (is_public(inc))
        return;
    const char *slash = strchr(inc, '/');
    if (!strcmp(dir, "tools")) {
        if (slash)
            violation(file, line, inc, "tools/ includes only the public headers (turboquant.h) "
                                       "and tools/ headers%s", "");
        return;
    }
    if (!slash) { /* a header next to the file */
        char p[2048];
        struct stat sb;
        const char *e = strrchr(file, '/');
        if (snprintf(p, sizeof(p), "%s/%.*s/%s", root, (int)(e - file), file, inc) >=
                (int)sizeof(p) ||
            stat(p, &sb) != 0)
            violation(file, line, inc, "no such header next to the file; name it by its folder "
                                       "(\"%s/...\")", dir);
        return;
    }
    const int from = rank_of(dir, strlen(dir)), to = rank_of(inc, (size_t)(slash - inc));
    if (to < 0) {
        violation(file, line, inc, "not a folder of src/ (the layers are in tests/test_layout.c "
                                   "and docs/ARCHITECTURE.md)%s", "");
        return;
    }
    if ((size_t)(slash - inc) == strlen(dir) && !strncmp(inc, dir, strlen(dir)))
        return; /* own folder */
    if (to >= from)
        violation(file, line, inc, "%s/ may include only lower layers (tools -> model -> {kv, "
                                   "quant, io, tok} -> {cpu, cuda} -> common -> core)", dir);
}

/* every #include "..." and #include <turboquant...> line of one file */
static void scan_file(const char *root, const char *file, const char *dir)
{
    char p[2048], buf[2048];
    FILE *f = snprintf(p, sizeof(p), "%s/%s", root, file) < (int)sizeof(p) ? fopen(p, "r") : NULL;
    CHECK(f != NULL, "cannot open %s", p);
    if (!f)
        return;
    n_files++;
    for (int line = 1; fgets(buf, sizeof(buf), f); line++) {
        const char *s = buf;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s != '#')
            continue;
        s++;
        while (*s == ' ' || *s == '\t')
            s++;
        if (strncmp(s, "include", 7))
            continue;
        s += 7;
        while (*s == ' ' || *s == '\t')
            s++;
        const char close = *s == '"' ? '"' : *s == '<' ? '>' : 0;
        const char *e = close ? strchr(s + 1, close) : NULL;
        if (!e || e - s - 1 >= 512)
            continue; /* a macro include: none in the tree */
        char inc[512];
        memcpy(inc, s + 1, (size_t)(e - s - 1));
        inc[e - s - 1] = 0;
        if (close == '>' && !is_public(inc))
            continue; /* system header */
        check_include(root, file, dir, line, inc);
    }
    fclose(f);
}

static int is_source(const char *name)
{
    const char *e = strrchr(name, '.');
    return e && (!strcmp(e, ".c") || !strcmp(e, ".h") || !strcmp(e, ".cu") || !strcmp(e, ".cuh"));
}

/* the files of rel (src/<dir> or tools), one level deep plus subfolders of the same layer */
static void scan_dir(const char *root, const char *rel, const char *dir)
{
    char p[2048];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    DIR *d = opendir(p);
    CHECK(d != NULL, "cannot open the folder %s", p);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char sub[1024];
        struct stat sb;
        if (snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name) >= (int)sizeof(sub) ||
            snprintf(p, sizeof(p), "%s/%s", root, sub) >= (int)sizeof(p) || stat(p, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode))
            scan_dir(root, sub, dir);
        else if (is_source(de->d_name))
            scan_file(root, sub, dir);
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 && argv[1][0] != '-' ? argv[1] : ".";
    char p[1024];
    printf("test_layout: the #include direction of %s/src and %s/tools\n", root, root);
    snprintf(p, sizeof(p), "%s/src", root);
    DIR *d = opendir(p);
    if (!d) {
        printf("FAIL: no %s (run from the source tree or pass it as the argument)\n", p);
        return 1;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat sb;
        if (de->d_name[0] == '.')
            continue;
        if (snprintf(p, sizeof(p), "%s/src/%s", root, de->d_name) >= (int)sizeof(p) ||
            stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (rank_of(de->d_name, strlen(de->d_name)) < 0) {
            printf("src/%s/: a folder with no layer: add it to the table in tests/test_layout.c "
                   "and to docs/ARCHITECTURE.md \"Layers\"\n", de->d_name);
            n_bad++;
            continue;
        }
        char rel[300];
        if (snprintf(rel, sizeof(rel), "src/%s", de->d_name) >= (int)sizeof(rel))
            continue;
        scan_dir(root, rel, de->d_name);
    }
    closedir(d);
    scan_dir(root, "tools", "tools");
    for (int i = 0; i < N_ALLOW; i++)
        if (!allow_used[i])
            printf("note: allowlist entry %s -> %s is no longer needed; remove it\n",
                   allow[i].file, allow[i].inc);
    printf("%d files, %d includes checked: %d against the layers, %d allowlisted\n", n_files,
           n_includes, n_bad, n_warn);
    CHECK(n_files > 50 && n_includes > 100, "too few files (%d) or includes (%d): wrong root?",
          n_files, n_includes);
    CHECK(n_bad == 0, "%d includes against the direction (listed above)", n_bad);
    return t_done();
}
