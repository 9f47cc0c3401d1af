// What `next build` would fetch from Google Fonts for agent-chat-ui's
// `Inter({ subsets: ["latin"] })` (src/app/layout.tsx), so the build runs
// offline: Next.js reads this module when NEXT_FONT_GOOGLE_MOCKED_RESPONSES
// names it. With that variable set, Next.js takes a font URL that is not an
// absolute path as the font file's own bytes, so the page's Inter is a
// placeholder the browser cannot decode, and it shows Next.js's metric-matched
// fallback (Arial) instead; nothing under test depends on the typeface.
module.exports = {
  "https://fonts.googleapis.com/css2?family=Inter:wght@100..900&display=swap": `/* latin */
@font-face {
  font-family: 'Inter';
  font-style: normal;
  font-weight: 100 900;
  font-display: swap;
  src: url(https://fonts.gstatic.com/s/inter/v18/offline-placeholder.woff2) format('woff2');
  unicode-range: U+0000-00FF, U+0131, U+0152-0153, U+02BB-02BC, U+02C6, U+02DA, U+02DC, U+0304, U+0308, U+0329, U+2000-206F, U+20AC, U+2122, U+2191, U+2193, U+2212, U+2215, U+FEFF, U+FFFD;
}
`,
};
