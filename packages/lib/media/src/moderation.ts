// The moderation hook: a pure function of what the pipeline knows about a video (probe result, title,
// description, tags, caption text) to ok | flag (hold for human review) | take_down, with the reasons. Rules are
// plain functions so a deployment swaps or extends the list without touching the pipeline.
import type { ProbeInfo } from './probe.js';

export type ModerationDecision = 'ok' | 'flag' | 'take_down';

export interface ModerationInput {
  probe: Pick<ProbeInfo, 'duration_s' | 'width' | 'height' | 'has_audio'>;
  title: string;
  description: string;
  tags: readonly string[];
  /** Recognised caption text ('' when captions are not done yet or the video has no audio). */
  caption_text: string;
}

export interface RuleVerdict {
  decision: Exclude<ModerationDecision, 'ok'>;
  rule: string;
  reason: string;
}

export type ModerationRule = (input: ModerationInput) => RuleVerdict | null;

export interface ModerationResult {
  decision: ModerationDecision;
  /** Every rule that fired, most severe first. */
  reasons: RuleVerdict[];
}

/** Take-down terms of the default rules: placeholders for a deployment's own list (matched as whole words). */
export const DEFAULT_TAKE_DOWN_TERMS: readonly string[] = ['stolen credit cards', 'terrorist recruitment'];
/** Review terms of the default rules: common spam phrasing, held for a human rather than removed. */
export const DEFAULT_FLAG_TERMS: readonly string[] = [
  'free money',
  'crypto giveaway',
  'click the link',
  'guaranteed profit',
];

export function termRule(
  name: string,
  terms: readonly string[],
  decision: RuleVerdict['decision'],
  fields: ReadonlyArray<'metadata' | 'captions'>,
): ModerationRule {
  const patterns = terms.map((t) => ({
    term: t,
    re: new RegExp(
      `\\b${t
        .toLowerCase()
        .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
        .replace(/\s+/g, '\\s+')}\\b`,
    ),
  }));
  return (input) => {
    const texts: Array<[string, string]> = [];
    if (fields.includes('metadata'))
      texts.push([
        'title/description/tags',
        `${input.title}\n${input.description}\n${input.tags.join(' ')}`.toLowerCase(),
      ]);
    if (fields.includes('captions')) texts.push(['captions', input.caption_text.toLowerCase()]);
    for (const [where, text] of texts) {
      const hit = patterns.find((p) => p.re.test(text));
      if (hit) return { decision, rule: name, reason: `"${hit.term}" in ${where}` };
    }
    return null;
  };
}

/**
 * The default rules, in order:
 * 1. take-down terms in the metadata or the captions -> take_down;
 * 2. spam phrases in the metadata or the captions -> flag;
 * 3. a title shouting in capitals (>= 12 letters, >= 90 % upper case) -> flag;
 * 4. a video under 1 s -> flag (usually a broken or probing upload).
 */
export const DEFAULT_RULES: readonly ModerationRule[] = [
  termRule('take-down-terms', DEFAULT_TAKE_DOWN_TERMS, 'take_down', ['metadata', 'captions']),
  termRule('spam-terms', DEFAULT_FLAG_TERMS, 'flag', ['metadata', 'captions']),
  (input) => {
    const letters = input.title.replace(/[^A-Za-z]/g, '');
    if (letters.length >= 12 && letters.replace(/[^A-Z]/g, '').length / letters.length >= 0.9) {
      return { decision: 'flag', rule: 'shouting-title', reason: 'the title is almost all capitals' };
    }
    return null;
  },
  (input) =>
    input.probe.duration_s < 1
      ? { decision: 'flag', rule: 'too-short', reason: `duration ${input.probe.duration_s} s is under 1 s` }
      : null,
];

const SEVERITY: Record<ModerationDecision, number> = { ok: 0, flag: 1, take_down: 2 };

export function moderate(input: ModerationInput, rules: readonly ModerationRule[] = DEFAULT_RULES): ModerationResult {
  const reasons = rules.map((r) => r(input)).filter((v): v is RuleVerdict => v !== null);
  reasons.sort((a, b) => SEVERITY[b.decision] - SEVERITY[a.decision]);
  return { decision: reasons[0]?.decision ?? 'ok', reasons };
}
