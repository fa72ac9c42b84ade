// Limited by middleware.ts, before this runs.
export function GET() {
  return Response.json({ limited: 'by middleware' });
}
