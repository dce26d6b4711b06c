/* regression_main.c -- replays fuzz corpora without libFuzzer: every file named on the command
 * line, or found in a directory named there, goes through LLVMFuzzerTestOneInput once (in an
 * exact-size heap copy, so ASan builds catch overreads). Built per target by tests/io.cmake and
 * run under ctest (label fast), so every seed and every fixed crash stays fixed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    uint8_t *buf;
    if (!f) {
        fprintf(stderr, "regression: cannot open %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "regression: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "regression: %s does not exist\n", argv[i]);
            errors++;
        } else if (S_ISDIR(sb.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                char p[4096];
                if (e->d_name[0] == '.')
                    continue;
                snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
                errors += run_file(p);
                files++;
            }
            if (d)
                closedir(d);
        } else {
            errors += run_file(argv[i]);
            files++;
        }
    }
    printf("%d inputs replayed, %d unreadable\n", files, errors);
    return errors || files == 0;
}
