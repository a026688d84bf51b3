package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"tine/harness"
	"tine/harness/openai"
	"tine/model"
	"tine/store"
)

// importSummary is what `tine import` reports; --json prints it.
type importSummary struct {
	Files     int            `json:"files"`
	Unchanged int            `json:"unchanged"`
	Failed    int            `json:"failed"`
	Runs      int            `json:"runs"`
	Messages  int            `json:"messages"`
	Skipped   []harness.Skip `json:"skipped"`
	Errors    []string       `json:"errors"`
	RunIDs    []string       `json:"run_ids"`
}

// parsers are the formats tine reads, by name.
var parsers = map[string]func(data []byte, name string) (harness.Transcript, error){
	"openai": openai.Parse,
}

func cmdImport(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "import", "PATH... [--format auto|openai] [--json]",
		"Import transcripts into the database, one run a file. A folder is searched for\n.json and .jsonl files. Unreadable lines are skipped and counted, never fatal;\na file already imported and unchanged (same size and time) is skipped.")
	format := f.String("format", "auto", "transcript `format`: auto or openai")
	asJSON := f.Bool("json", false, "print the summary as JSON")
	paths, err := f.parse(args, 0, -1)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("import: give the files or folders to import (finding every agent's sessions on its own is not built yet)")
	}
	if *format != "auto" && parsers[*format] == nil {
		return usagef("import: unknown --format %q (known: auto, openai)", *format)
	}
	files, err := expandPaths(paths)
	if err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	sum := importSummary{Skipped: []harness.Skip{}, Errors: []string{}, RunIDs: []string{}}
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		sum.Files++
		if err := importFile(ctx, st, path, *format, &sum); err != nil {
			sum.Failed++
			sum.Errors = append(sum.Errors, harness.OneLine(err.Error(), 0))
		}
	}
	if *asJSON {
		if err := writeJSON(e.stdout, sum); err != nil {
			return err
		}
	} else {
		printSummary(e, sum)
	}
	if sum.Failed > 0 && sum.Runs == 0 && sum.Unchanged == 0 {
		return fmt.Errorf("nothing imported: %s", sum.Errors[0])
	}
	return nil
}

func printSummary(e *env, sum importSummary) {
	fmt.Fprintf(e.stdout, "imported %d runs, %d messages from %d files", sum.Runs, sum.Messages, sum.Files)
	if sum.Unchanged > 0 {
		fmt.Fprintf(e.stdout, " (%d unchanged, skipped)", sum.Unchanged)
	}
	fmt.Fprintln(e.stdout)
	if len(sum.Skipped) > 0 {
		fmt.Fprintf(e.stdout, "skipped %d unreadable lines:\n", len(sum.Skipped))
		for i, s := range sum.Skipped {
			if i == 20 {
				fmt.Fprintf(e.stdout, "  ... and %d more (--json lists all)\n", len(sum.Skipped)-20)
				break
			}
			fmt.Fprintf(e.stdout, "  %s\n", harness.OneLine(s.String(), 200))
		}
	}
	for _, msg := range sum.Errors {
		fmt.Fprintf(e.stderr, "tine: %s\n", msg)
	}
}

// expandPaths turns folders into the transcript files under them.
func expandPaths(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ext := strings.ToLower(filepath.Ext(path))
			if !d.IsDir() && (ext == ".json" || ext == ".jsonl") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// importFile reads one file and stores it as a run, unless it was imported
// before and has not changed since.
func importFile(ctx context.Context, st *store.Store, path, format string, sum *importSummary) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return err
	}
	if prev, ok, err := st.Source(ctx, abs); err != nil {
		return err
	} else if ok && prev.Size == info.Size() && prev.MTime.Equal(info.ModTime()) && prev.RunID != "" {
		sum.Unchanged++
		return nil
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	if format == "auto" {
		format = "openai" // the only format so far; agents' formats detect themselves later
	}
	t, err := parsers[format](data, path)
	sum.Skipped = append(sum.Skipped, t.Skipped...)
	if err != nil {
		return err
	}
	if len(t.Messages) == 0 {
		return fmt.Errorf("%s: no messages", path)
	}
	run := t.Run
	if run.Status == "" {
		run.Status = model.Completed
	}
	src := store.Source{Path: abs, Format: format, Size: info.Size(), MTime: info.ModTime(), Offset: info.Size()}
	if err := st.ImportRun(ctx, src, &run, t.Messages); err != nil {
		return err
	}
	sum.Runs++
	sum.Messages += len(t.Messages)
	sum.RunIDs = append(sum.RunIDs, run.ID)
	return nil
}
