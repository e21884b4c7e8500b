// Entry point for the vendored CodeMirror 6 bundle used by the EDF (TOML)
// editor page. Re-exports only; exposes a single global: window.BelvedereCM.
// Rebuild: cd frontend && npm ci && npm run build
import { basicSetup, minimalSetup } from "codemirror";
import { EditorState, Compartment, StateEffect, StateField, Transaction } from "@codemirror/state";
import { EditorView, keymap, placeholder, Decoration, ViewPlugin, lineNumbers } from "@codemirror/view";
import { StreamLanguage, LanguageSupport, syntaxHighlighting, defaultHighlightStyle, HighlightStyle } from "@codemirror/language";
import { toml as tomlMode } from "@codemirror/legacy-modes/mode/toml";
import {
  linter, lintGutter, setDiagnostics, forceLinting, diagnosticCount, lintKeymap,
  openLintPanel, closeLintPanel, nextDiagnostic, forEachDiagnostic,
} from "@codemirror/lint";
import {
  autocompletion, CompletionContext, completeFromList, ifIn, ifNotIn, snippetCompletion,
  startCompletion, closeCompletion, acceptCompletion, completionKeymap,
} from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap, indentWithTab, undo, redo } from "@codemirror/commands";
import { search, searchKeymap, openSearchPanel, highlightSelectionMatches } from "@codemirror/search";
import {
  MergeView, unifiedMergeView, getChunks, goToNextChunk, goToPreviousChunk,
  acceptChunk, rejectChunk, getOriginalDoc, updateOriginalDoc,
} from "@codemirror/merge";

const toml = StreamLanguage.define(tomlMode);

window.BelvedereCM = Object.freeze({
  // codemirror
  basicSetup, minimalSetup,
  // @codemirror/state
  EditorState, Compartment, StateEffect, StateField, Transaction,
  // @codemirror/view
  EditorView, keymap, placeholder, Decoration, ViewPlugin, lineNumbers,
  // @codemirror/language (+ legacy TOML stream mode)
  StreamLanguage, LanguageSupport, syntaxHighlighting, defaultHighlightStyle, HighlightStyle,
  toml, tomlMode,
  // @codemirror/lint
  linter, lintGutter, setDiagnostics, forceLinting, diagnosticCount, lintKeymap,
  openLintPanel, closeLintPanel, nextDiagnostic, forEachDiagnostic,
  // @codemirror/autocomplete
  autocompletion, CompletionContext, completeFromList, ifIn, ifNotIn, snippetCompletion,
  startCompletion, closeCompletion, acceptCompletion, completionKeymap,
  // @codemirror/commands
  defaultKeymap, history, historyKeymap, indentWithTab, undo, redo,
  // @codemirror/search
  search, searchKeymap, openSearchPanel, highlightSelectionMatches,
  // @codemirror/merge
  MergeView, unifiedMergeView, getChunks, goToNextChunk, goToPreviousChunk,
  acceptChunk, rejectChunk, getOriginalDoc, updateOriginalDoc,
});
