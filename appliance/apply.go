package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/store"
)

const sourceDefault = "default"

// loadInitial picks the document to start on: --config when given (stored
// as a new version only if it differs from the active one), else the active
// stored version, else the --factory document, else the embedded default.
func (a *App) loadInitial(ctx context.Context) error {
	v, raw, err := a.st.ActiveConfig(ctx)
	var active *config.Document
	switch {
	case err == nil:
		if active, err = config.Load(raw); err != nil {
			return fmt.Errorf("appliance: stored config version %d does not load: %w", v.Version, err)
		}
	case errors.Is(err, store.ErrNotFound):
	default:
		return fmt.Errorf("appliance: %w", err)
	}

	var doc *config.Document
	var sealed []byte
	source := ""
	switch {
	case a.opts.ConfigFile != "":
		data, err := os.ReadFile(a.opts.ConfigFile)
		if err != nil {
			return fmt.Errorf("appliance: --config: %w", err)
		}
		if doc, sealed, err = prepare(data, active); err != nil {
			return fmt.Errorf("appliance: --config %s: %w", a.opts.ConfigFile, err)
		}
		source = "file:" + a.opts.ConfigFile
	case active != nil:
		a.cur.Store(&running{doc: active, version: v})
		return nil
	case a.opts.FactoryFile != "":
		data, err := os.ReadFile(a.opts.FactoryFile)
		if err != nil {
			return fmt.Errorf("appliance: --factory: %w", err)
		}
		if doc, sealed, err = prepare(data, nil); err != nil {
			return fmt.Errorf("appliance: --factory %s: %w", a.opts.FactoryFile, err)
		}
		source = "factory:" + a.opts.FactoryFile
	default:
		doc = config.Default()
		if err := doc.Seal(nil); err != nil {
			return fmt.Errorf("appliance: embedded default: %w", err)
		}
		if sealed, err = json.Marshal(doc); err != nil {
			return fmt.Errorf("appliance: embedded default: %w", err)
		}
		source = sourceDefault
	}
	if active != nil && sha256Hex(sealed) == v.SHA256 {
		a.cur.Store(&running{doc: active, version: v}) // same document as stored: no new version
		return nil
	}
	if v, err = a.st.ApplyConfig(ctx, sealed, source); err != nil {
		return fmt.Errorf("appliance: storing config: %w", err)
	}
	a.cur.Store(&running{doc: doc, version: v})
	return nil
}

// prepare turns a pushed document into the sealed form that is stored
// (HA1 instead of passwords), validating it whole against the running one.
func prepare(raw []byte, prev *config.Document) (*config.Document, []byte, error) {
	doc, err := config.Parse(raw)
	if err != nil {
		return nil, nil, validationError(err)
	}
	var errs config.Errors
	if err := doc.Seal(prev); err != nil {
		var se config.Errors
		if !errors.As(err, &se) {
			return nil, nil, err
		}
		errs = append(errs, se...)
	}
	errs = append(errs, doc.Validate()...)
	errs = append(errs, checkMusicOnHold(doc)...)
	if len(errs) > 0 {
		return nil, nil, validationError(dedupe(errs))
	}
	sealed, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("appliance: encoding document: %w", err)
	}
	return doc, sealed, nil
}

func dedupe(errs config.Errors) config.Errors {
	seen := map[config.FieldError]bool{}
	out := errs[:0]
	for _, e := range errs {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// validationError converts config errors into the API's 422 form.
func validationError(err error) error {
	var ce config.Errors
	if !errors.As(err, &ce) {
		return &api.ValidationError{Errors: []api.FieldError{{Path: "", Message: err.Error()}}}
	}
	ve := &api.ValidationError{}
	for _, e := range ce {
		ve.Errors = append(ve.Errors, api.FieldError{Path: e.Path, Message: e.Message})
	}
	return ve
}

// Apply validates doc, applies it live and stores it as a new version.
func (a *App) Apply(ctx context.Context, raw []byte, source string, ifMatch int64, dryRun bool) (api.ApplyResult, error) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	cur := a.running()
	if ifMatch != 0 && ifMatch != cur.version.Version {
		return api.ApplyResult{}, fmt.Errorf("%w: running version is %d, If-Match says %d", api.ErrConflict, cur.version.Version, ifMatch)
	}
	doc, sealed, err := prepare(raw, cur.doc)
	if err != nil {
		return api.ApplyResult{}, err
	}
	if dryRun {
		return api.ApplyResult{Version: apiVersion(cur.version), DryRun: true, Valid: true, Diff: config.Diff(cur.doc, doc)}, nil
	}
	if sha256Hex(sealed) == cur.version.SHA256 {
		// HQ re-pushing the running document (or a redacted copy of it) is
		// a no-op, not a new version: history stays readable.
		return api.ApplyResult{Version: apiVersion(cur.version), Valid: true, Unchanged: true}, nil
	}
	return a.applyLocked(ctx, doc, sealed, source)
}

// Rollback re-applies a stored version as a new version.
func (a *App) Rollback(ctx context.Context, version int64) (api.ApplyResult, error) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	_, raw, err := a.st.Config(ctx, version)
	if errors.Is(err, store.ErrNotFound) {
		return api.ApplyResult{}, fmt.Errorf("config version %d: %w", version, api.ErrNotFound)
	}
	if err != nil {
		return api.ApplyResult{}, err
	}
	doc, sealed, err := prepare(raw, a.running().doc)
	if err != nil {
		return api.ApplyResult{}, err
	}
	return a.applyLocked(ctx, doc, sealed, fmt.Sprintf("rollback:%d", version))
}

// applyLocked prepares every part for doc, stores it as the new version,
// then commits every part; if a part refuses or the store fails, every
// prepared part is aborted and the box runs on exactly as before.
func (a *App) applyLocked(ctx context.Context, doc *config.Document, sealed []byte, source string) (api.ApplyResult, error) {
	if a.stopping {
		return api.ApplyResult{}, errStopping
	}
	next, err := translate(doc, a.env())
	if err != nil {
		return api.ApplyResult{}, validationError(err)
	}
	changes, err := prepareAll(ctx, a.parts, next)
	if err != nil {
		a.log.Warn("config refused", "source", source, "err", err)
		return api.ApplyResult{}, err
	}
	v, err := a.st.ApplyConfig(ctx, sealed, source)
	if err != nil {
		changes.abort()
		return api.ApplyResult{}, fmt.Errorf("storing config: %w", err)
	}
	// The version is stored: from here on nothing fails.
	a.cur.Store(&running{doc: doc, version: v, parts: next})
	changes.commit()
	a.log.Info("config applied", "version", v.Version, "source", source)
	return api.ApplyResult{Version: apiVersion(v), Valid: true}, nil
}
