/** The click record and the per-link aggregates, as the rest of the service sees them. */

export interface ClickRecord {
  short_code: string;
  timestamp: number;
  referer: string | null;
  country: string | null;
  user_agent: string | null;
}

export interface LinkStats {
  short_code: string;
  total: number;
  by_day: Record<string, number>;
  by_country: Record<string, number>;
  by_referer: Record<string, number>;
}
